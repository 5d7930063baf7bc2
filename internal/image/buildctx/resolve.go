package buildctx

import (
	"errors"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// inRoot is how a path of an image's root (or of the context) is
// resolved here: as a container would, every symbolic link followed, but
// with the root as "/" and ".." stopping there, so nothing outside it is
// reached; no magic /proc links and no other mount either.
const inRoot = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// openIn opens rel (components joined by "/"; "" or "." is the root
// itself) below the directory rootfd, resolved inRoot, with flags. The
// last component is followed too unless flags has O_NOFOLLOW.
func openIn(rootfd int, rel string, flags int) (int, error) {
	if rel == "" {
		rel = "."
	}
	how := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: inRoot}
	for {
		fd, err := unix.Openat2(rootfd, rel, how)
		// EAGAIN: a rename raced the resolution; try again.
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			continue
		}
		if err != nil {
			return -1, &os.PathError{Op: "openat2", Path: "/" + rel, Err: err}
		}
		return fd, nil
	}
}

// fdOf returns f's descriptor. f must stay open (and referenced) while
// the descriptor is used.
func fdOf(f *os.File) int { return int(f.Fd()) }

// openFile wraps fd as an *os.File named name.
func openFile(fd int, name string) *os.File { return os.NewFile(uintptr(fd), name) }

// joinRel joins a relative path and a name ("." or "" being the root).
func joinRel(rel, name string) string {
	if rel == "" || rel == "." {
		return name
	}
	return rel + "/" + name
}

// splitRel splits a cleaned relative path into its components; the root
// ("." or "") has none.
func splitRel(rel string) []string {
	if rel == "" || rel == "." {
		return nil
	}
	return strings.Split(rel, "/")
}

// lstatAt returns the status of name in dirfd, not following a symbolic
// link.
func lstatAt(dirfd int, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// readlinkAt returns the target of the symbolic link name in dirfd.
func readlinkAt(dirfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// sameFile reports whether a and b are the same inode.
func sameFile(a, b *unix.Stat_t) bool { return a.Dev == b.Dev && a.Ino == b.Ino }
