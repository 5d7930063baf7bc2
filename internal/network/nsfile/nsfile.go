// Package nsfile keeps network namespaces as bound files (the way ip
// netns does, in a directory of the caller's choosing) and runs code in
// them on a thread of its own.
package nsfile

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Named network namespaces: a namespace lives as long as a bind mount of
// it on a file (the way ip netns keeps them, but in cairnd's own
// directory).

// New makes a network namespace and binds it on path (a new file).
func New(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	err = onThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		if err := unix.Mount("/proc/thread-self/ns/net", path, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind namespace: %w", err)
		}
		return nil
	})
	if err != nil {
		os.Remove(path)
	}
	return err
}

// Remove unbinds the namespace at path and removes the file; the
// namespace ends with the last process and socket in it. A path that is
// not there is no error.
func Remove(path string) error {
	err := unix.Unmount(path, unix.MNT_DETACH)
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unbind %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// Is reports whether path is a bound network namespace.
func Is(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.NSFS_MAGIC
}

// Run runs fn on an OS thread in the namespace at path. Sockets fn opens
// stay in that namespace for good, whatever thread uses them later.
func Run(path string, fn func() error) error {
	return onThread(func() error {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("enter %s: %w", path, err)
		}
		return fn()
	})
}

// onThread runs fn on a locked OS thread of its own and then puts the
// thread back into the namespace it started in. If that fails the thread
// stays locked and Go ends it with the goroutine, so no other goroutine
// ever runs in a namespace it did not ask for.
func onThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return // the thread ends locked
		}
		defer unix.Close(orig)
		ferr := fn()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("back to the host's namespace: %w", err))
			return // the thread ends locked
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}
