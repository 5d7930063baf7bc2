package browse

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Config says how cairnd runs the browse server.
type Config struct {
	Binary     string // cairnd's own binary; run as `Binary browse-server …`
	Mountpoint string // where the view is mounted (<data dir>/browse)
	Tables     string // the tables directory (<data dir>/browse-tables)
	Pool       string // the pool's root
	Log        string // the server's log file, appended to
}

// Timeouts of Ensure and Stop.
var (
	// answerTimeout bounds a stat of the mount point: a server that does
	// not answer within it is reported, not waited for.
	answerTimeout = 5 * time.Second
	// startTimeout bounds the wait for a started server's mount.
	startTimeout = 15 * time.Second
	// exitTimeout bounds Stop's wait for the server to exit by itself.
	exitTimeout = 5 * time.Second
)

// Ensure makes sure a browse server serves c.Mountpoint. If the mount there
// is live (answers a stat), it does nothing. If it is dead (the server
// died: ENOTCONN or ECONNABORTED), it detaches that mount (only a mount of the view's own
// FUSE type at exactly c.Mountpoint, never anything else). Then it starts
// `c.Binary browse-server` in a session of its own, logging to c.Log, so
// that it outlives cairnd, and waits until the view is mounted.
func Ensure(ctx context.Context, c Config) error {
	for _, p := range []*string{&c.Binary, &c.Mountpoint, &c.Tables, &c.Pool, &c.Log} {
		if *p == "" {
			return errors.New("browse: Ensure needs Binary, Mountpoint, Tables, Pool and Log")
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	if err := os.MkdirAll(c.Tables, 0o700); err != nil {
		return fmt.Errorf("browse: %w", err)
	}
	for attempt := 0; ; attempt++ {
		live, err := probe(ctx, c.Mountpoint)
		if err != nil {
			return err
		}
		if live {
			return sameConfig(c)
		}
		if attempt > 0 {
			// Started, no error, yet not live: cannot happen unless
			// something else unmounts it as fast.
			return fmt.Errorf("browse: the view at %s went away right after the server started; see %s", c.Mountpoint, c.Log)
		}
		if err := start(ctx, c); err != nil {
			return err
		}
	}
}

// probe reports whether the view at mp is live. A dead view is detached,
// and a missing mount point made; both then report false. A mount of
// another kind at mp, or a view that does not answer, is an error.
func probe(ctx context.Context, mp string) (bool, error) {
	for detached := 0; ; detached++ {
		err := statWithin(ctx, mp, answerTimeout)
		m, mounted, merr := topMount(mp)
		if merr != nil {
			return false, merr
		}
		switch {
		case err == nil && !mounted:
			return false, nil
		case err == nil && m.fsType == "fuse."+fsType:
			return true, nil
		case err == nil:
			return false, fmt.Errorf("browse: %s is a mount of type %s, not the view; not touching it", mp, m.fsType)
		case errors.Is(err, os.ErrNotExist) && !mounted:
			if err := os.MkdirAll(mp, 0o755); err != nil {
				return false, fmt.Errorf("browse: %w", err)
			}
			return false, nil
		case dead(err) && mounted && m.fsType == "fuse."+fsType:
			if detached >= 8 {
				return false, fmt.Errorf("browse: %s: still a dead mount after detaching %d", mp, detached)
			}
			if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil {
				return false, fmt.Errorf("browse: detaching the dead view at %s: %w", mp, err)
			}
		default:
			return false, fmt.Errorf("browse: %s (mounted: %v, type %q): %w", mp, mounted, m.fsType, err)
		}
	}
}

// dead reports whether err is what a FUSE mount whose server is gone
// answers: ENOTCONN, or ECONNABORTED for a request the kernel had under
// way when the server died.
func dead(err error) bool {
	return errors.Is(err, unix.ENOTCONN) || errors.Is(err, unix.ECONNABORTED)
}

// statWithin stats path, giving up after d: a stat of a FUSE mount whose
// server hangs never returns (the goroutine is left behind then).
func statWithin(ctx context.Context, path string, d time.Duration) error {
	done := make(chan error, 1)
	go func() {
		_, err := os.Stat(path)
		done <- err
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("browse: %s does not answer a stat within %v (a hung server?)", path, d)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// start runs the server detached and waits for its mount.
func start(ctx context.Context, c Config) error {
	logf, err := os.OpenFile(c.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("browse: the server's log: %w", err)
	}
	defer logf.Close()
	logStart, _ := logf.Seek(0, 2)
	// Not CommandContext: the server must outlive ctx and cairnd.
	cmd := exec.Command(c.Binary, ServerCommand, "--mountpoint", c.Mountpoint, "--tables", c.Tables, "--pool", c.Pool)
	cmd.Dir = "/" // hold no directory of cairnd's
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = logf, logf
	// A session of its own: no signal meant for cairnd's group or
	// terminal reaches it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("browse: starting the server: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // reaps it, whenever it ends

	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("browse: the server exited before its view was mounted (%v): %s", err, tail(c.Log, logStart))
		case <-deadline.C:
			return fmt.Errorf("browse: the server (pid %d) did not mount %s within %v: %s", cmd.Process.Pid, c.Mountpoint, startTimeout, tail(c.Log, logStart))
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if m, ok, _ := topMount(c.Mountpoint); ok && m.fsType == "fuse."+fsType && serverPid(c.Mountpoint) == cmd.Process.Pid {
			return nil
		}
	}
}

// Stop unmounts the view at mp and ends its server: the server exits by
// itself once no container holds the view any more; one that still runs
// after a few seconds (a running container bound to it) is sent SIGTERM,
// then SIGKILL. A dead view is just detached. Nothing is done if no view
// is mounted at mp; a mount of another type there is an error.
func Stop(mp string) error {
	mp, err := filepath.Abs(mp)
	if err != nil {
		return err
	}
	pid := 0
	for i := 0; ; i++ {
		m, mounted, err := topMount(mp)
		if err != nil {
			return err
		}
		if !mounted {
			break
		}
		if m.fsType != "fuse."+fsType {
			if i == 0 {
				return fmt.Errorf("browse: %s is a mount of type %s, not the view; not touching it", mp, m.fsType)
			}
			break // what was below the view
		}
		if i >= 8 {
			return fmt.Errorf("browse: %s: still mounted after %d unmounts", mp, i)
		}
		if p := serverPid(mp); p > 0 && pid == 0 {
			pid = p
		}
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("browse: unmount %s: %w", mp, err)
		}
	}
	if pid == 0 || !isServer(pid, mp) {
		return nil
	}
	for _, sig := range []syscall.Signal{0, syscall.SIGTERM, syscall.SIGKILL} {
		if sig != 0 {
			if err := syscall.Kill(pid, sig); err != nil {
				break
			}
		}
		for deadline := time.Now().Add(exitTimeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if !isServer(pid, mp) {
				return nil
			}
		}
	}
	if isServer(pid, mp) {
		return fmt.Errorf("browse: the server (pid %d) of %s does not exit", pid, mp)
	}
	return nil
}

// sameConfig checks that the live server at c.Mountpoint serves c.Tables
// and c.Pool: a view of another pool is not silently kept.
func sameConfig(c Config) error {
	pid := serverPid(c.Mountpoint)
	args := serverArgs(pid)
	if args == nil {
		return fmt.Errorf("browse: the view at %s is live but its server (pid %d) cannot be found", c.Mountpoint, pid)
	}
	if args["--tables"] != c.Tables || args["--pool"] != c.Pool {
		return fmt.Errorf("browse: the view at %s is served (pid %d) for tables %s and pool %s, not %s and %s; stop it first",
			c.Mountpoint, pid, args["--tables"], args["--pool"], c.Tables, c.Pool)
	}
	return nil
}

// serverPid asks the view at mp for its server's pid; 0 if it cannot.
func serverPid(mp string) int {
	buf := make([]byte, 32)
	n, err := unix.Getxattr(mp, pidXattr, buf)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(string(buf[:n]))
	if err != nil {
		return 0
	}
	return pid
}

// isServer reports whether pid is alive (not a zombie) and is the browse
// server of mp, so that a pid reused meanwhile is never signalled.
func isServer(pid int, mp string) bool {
	args := serverArgs(pid)
	return args != nil && args["--mountpoint"] == mp
}

// serverArgs returns the flags of process pid (flag → value) if it is a
// live browse server as Ensure starts them, else nil.
func serverArgs(pid int) map[string]string {
	if pid <= 0 {
		return nil
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	// The state follows the command name in parentheses.
	if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' {
		return nil
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return nil
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if len(args) < 2 || args[1] != ServerCommand {
		return nil
	}
	flags := make(map[string]string)
	for i := 2; i+1 < len(args); i += 2 {
		flags[args[i]] = args[i+1]
	}
	return flags
}

// mountEntry is one line of /proc/self/mountinfo, the fields used here.
type mountEntry struct {
	mountPoint, fsType string
}

// topMount returns the topmost mount at exactly mp (the last listed), if
// any.
func topMount(mp string) (mountEntry, bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return mountEntry{}, false, err
	}
	defer f.Close()
	var top mountEntry
	found := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m, ok := parseMountinfo(sc.Text())
		if ok && m.mountPoint == mp {
			top, found = m, true
		}
	}
	return top, found, sc.Err()
}

// parseMountinfo parses one mountinfo line: "36 35 98:0 /root /mnt opts
// [optional fields] - fstype source superopts".
func parseMountinfo(line string) (mountEntry, bool) {
	fields := strings.Fields(line)
	if len(fields) < 7 {
		return mountEntry{}, false
	}
	for i := 6; i < len(fields)-1; i++ {
		if fields[i] == "-" {
			return mountEntry{mountPoint: unescapeOctal(fields[4]), fsType: fields[i+1]}, true
		}
	}
	return mountEntry{}, false
}

// unescapeOctal undoes mountinfo's \NNN escapes (space, tab, newline, \).
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// tail returns what was appended to the log at path since offset, at most
// its last 2 KiB, for error messages.
func tail(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < offset {
		return "(no log)"
	}
	b = b[offset:]
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	if s := strings.TrimSpace(string(b)); s != "" {
		return s
	}
	return "(nothing logged)"
}
