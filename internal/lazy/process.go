package lazy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// fuseMagic is statfs's f_type of a FUSE mount.
const fuseMagic = 0x65735546

// Timeouts of Start and Stop.
var (
	startTimeout = 15 * time.Second
	exitTimeout  = 5 * time.Second
)

// Mountpoint is where the lazyfs server of state directory dir mounts
// the root: what runsc is given as the sandbox's root.
func Mountpoint(dir string) string { return filepath.Join(dir, mountDir) }

// Start makes sure a lazyfs server serves state directory dir over
// backing: if one does, it does nothing; a dead mount (its server gone)
// is detached first. The server runs `binary lazyfs` in a session of its
// own, so that it outlives cairnd, logging to dir/lazyfs.log; Start
// returns once the root is mounted.
func Start(ctx context.Context, binary, dir, backing string) error {
	if Live(dir) {
		return nil
	}
	mp := Mountpoint(dir)
	if err := detachDead(mp); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(dir, logFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("lazyfs: its log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(binary, ServerCommand, "--state", dir, "--backing", backing)
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("lazyfs: start: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("lazyfs exited before the root was mounted (%v); see %s", err, filepath.Join(dir, logFile))
		case <-deadline.C:
			return fmt.Errorf("lazyfs (pid %d) did not mount %s within %v; see %s", cmd.Process.Pid, mp, startTimeout, filepath.Join(dir, logFile))
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if isFuse(mp) && serverPid(dir) == cmd.Process.Pid {
			return nil
		}
	}
}

// Live reports whether the lazyfs server of dir runs and its root
// answers.
func Live(dir string) bool {
	return isServer(serverPid(dir), dir) && isFuse(Mountpoint(dir))
}

// Stop unmounts the root of dir and ends its server (SIGTERM, then
// SIGKILL if it does not exit). Nothing runs on the root then: the caller
// stopped the sandbox.
func Stop(dir string) error {
	mp := Mountpoint(dir)
	pid := serverPid(dir)
	for i := 0; i < 8; i++ {
		var st unix.Statfs_t
		err := unix.Statfs(mp, &st)
		if err == nil && st.Type != fuseMagic {
			break
		}
		if err != nil && !errors.Is(err, unix.ENOTCONN) && !errors.Is(err, unix.ECONNABORTED) {
			break
		}
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("lazyfs: unmount %s: %w", mp, err)
		}
	}
	if !isServer(pid, dir) {
		return nil
	}
	for _, sig := range []syscall.Signal{0, syscall.SIGTERM, syscall.SIGKILL} {
		if sig != 0 {
			if err := syscall.Kill(pid, sig); err != nil {
				break
			}
		}
		for deadline := time.Now().Add(exitTimeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if !isServer(pid, dir) {
				return nil
			}
		}
	}
	if isServer(pid, dir) {
		return fmt.Errorf("lazyfs (pid %d) of %s does not exit", pid, dir)
	}
	return nil
}

// Remove stops the server of dir and deletes the state directory.
func Remove(dir string) error {
	if err := Stop(dir); err != nil {
		return err
	}
	if isFuse(Mountpoint(dir)) {
		return fmt.Errorf("lazyfs: %s is still mounted", Mountpoint(dir))
	}
	return os.RemoveAll(dir)
}

// detachDead detaches a FUSE mount at mp whose server is gone.
func detachDead(mp string) error {
	for i := 0; i < 8; i++ {
		var st unix.Statfs_t
		err := unix.Statfs(mp, &st)
		if err == nil {
			if st.Type == fuseMagic {
				if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil {
					return fmt.Errorf("lazyfs: detach the stale root at %s: %w", mp, err)
				}
				continue
			}
			return nil
		}
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.ENOTCONN) && !errors.Is(err, unix.ECONNABORTED) {
			return fmt.Errorf("lazyfs: %s: %w", mp, err)
		}
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("lazyfs: detach the dead root at %s: %w", mp, err)
		}
	}
	return fmt.Errorf("lazyfs: %s stays mounted", mp)
}

func isFuse(mp string) bool {
	var st unix.Statfs_t
	return unix.Statfs(mp, &st) == nil && st.Type == fuseMagic
}

// serverPid is the pid the server of dir wrote; 0 if none.
func serverPid(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, pidFile))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// isServer reports whether pid is a live lazyfs server of dir (not a
// zombie, not a pid reused by something else).
func isServer(pid int, dir string) bool {
	if pid <= 0 {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	if i := strings.LastIndexByte(string(stat), ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if len(args) < 2 || args[1] != ServerCommand {
		return false
	}
	i := slices.Index(args, "--state")
	return i > 0 && i+1 < len(args) && args[i+1] == dir
}
