package image

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// prepareRoot adds what every cairn image needs whatever its origin: the
// mount point of /.cairn (cairn-init, the agent socket) and the standard
// mount points gVisor fills, each made if missing (a new /tmp 1777). One
// that is there and not a directory (a pulled image's /tmp as a symbolic
// link) is refused, I06: cairn's own writes must not follow it out of the
// root.
func prepareRoot(dir string) error {
	for _, d := range []string{".cairn", "proc", "sys", "dev", "tmp"} {
		p := filepath.Join(dir, d)
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if err := os.Mkdir(p, 0o755); err != nil {
				return err
			}
			if d == "tmp" {
				if err := os.Chmod(p, 0o777|os.ModeSticky); err != nil {
					return err
				}
			}
		case err != nil:
			return err
		case !fi.IsDir():
			return errdefs.New(api.CodeImageDamaged, "the image's /%s is not a directory (%s)", d, fi.Mode().Type())
		}
	}
	return nil
}

// buildBusybox makes a minimal tree: the static busybox and a link per applet.
func buildBusybox(ctx context.Context, dir string, report Reporter) error {
	src, err := exec.LookPath("busybox")
	if err != nil {
		return fmt.Errorf("busybox not found (install Debian's busybox-static): %w", err)
	}
	for _, d := range []string{"bin", "sbin", "usr/bin", "usr/sbin", "etc", "root", "home", "var/log", "run"} { // /tmp: prepareRoot
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.Chmod(filepath.Join(dir, "root"), 0o700); err != nil {
		return err
	}
	if err := copyFile(src, filepath.Join(dir, "bin/busybox"), 0o755); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, src, "--list-full").Output()
	if err != nil {
		return fmt.Errorf("busybox --list-full: %w", err)
	}
	n := 0
	for _, applet := range strings.Fields(string(out)) {
		if filepath.Base(applet) == "busybox" {
			continue
		}
		link := filepath.Join(dir, applet)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			return err
		}
		if err := os.Symlink("/bin/busybox", link); err != nil {
			return err
		}
		n++
	}
	report(api.Progress{Phase: api.PhaseImage, Done: int64(n), Total: int64(n), Unit: api.UnitFiles},
		fmt.Sprintf("Linked %d busybox applets", n))
	files := map[string]string{
		"etc/passwd":      "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
		"etc/group":       "root:x:0:\nnogroup:x:65534:\n",
		"etc/hosts":       "127.0.0.1\tlocalhost\n::1\tlocalhost\n",
		"etc/resolv.conf": "",
		"etc/os-release":  "NAME=\"cairn busybox\"\nID=busybox\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// debianBuilder returns a builder that debootstraps Debian 12 (minbase).
// Downloaded packages are kept in cacheDir so a rebuild does not fetch again.
func debianBuilder(cacheDir string) func(ctx context.Context, dir string, report Reporter) error {
	return func(ctx context.Context, dir string, report Reporter) error {
		if _, err := exec.LookPath("debootstrap"); err != nil {
			return fmt.Errorf("debootstrap not found (install Debian's debootstrap): %w", err)
		}
		debs := filepath.Join(cacheDir, "debootstrap")
		if err := os.MkdirAll(debs, 0o755); err != nil {
			return err
		}
		// A mirror that fails to answer once (measured: "Failed getting
		// release file") is tried again, from an empty tree.
		err := retryMirror(ctx, report, "debootstrap", func() error {
			cmd := exec.CommandContext(ctx, "debootstrap", "--variant=minbase",
				"--include=procps,curl,sqlite3,ca-certificates",
				"--cache-dir="+debs, "bookworm", dir, "http://deb.debian.org/debian")
			killGroupOnCancel(cmd)
			return runWithProgress(cmd, report.step)
		}, func() error { return emptyDir(dir) })
		if err != nil {
			return err
		}
		// The packages are in cacheDir: the image's copies go, as
		// apt-get clean would.
		if err := removeDebs(filepath.Join(dir, "var/cache/apt/archives")); err != nil {
			return err
		}
		// runsc sets the live hostname per sandbox; this is the fallback.
		return os.WriteFile(filepath.Join(dir, "etc/hostname"), []byte("cairn\n"), 0o644)
	}
}

// mirrorRetryDelay is the wait before the second try at the mirror; twice
// it before the third.
var mirrorRetryDelay = 2 * time.Second

// retryMirror runs attempt until it succeeds or fails other than by the
// mirror (mirrorFailed), three times at most: before each new try it
// reports the failure, calls reset (if not nil) and waits (2 s, then 4 s).
// The error it returns starts with what ("apt-get: exit status 100: …").
func retryMirror(ctx context.Context, report Reporter, what string, attempt, reset func() error) error {
	for try := 1; ; try++ {
		err := attempt()
		if err == nil {
			return nil
		}
		if try == 3 || ctx.Err() != nil || !mirrorFailed(err) {
			return fmt.Errorf("%s: %w", what, err)
		}
		report.step(fmt.Sprintf("The Debian mirror failed (%v); trying again (%d of 3)", err, try+1))
		if reset != nil {
			if err := reset(); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(try) * mirrorRetryDelay):
		}
	}
}

// runWithProgress runs cmd and passes each output line to progress; the last
// lines are kept for the error.
func runWithProgress(cmd *exec.Cmd, progress func(line string)) error {
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		return err
	}
	var tail []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			progress(line)
			tail = append(tail, line)
			if len(tail) > 5 {
				tail = tail[1:]
			}
		}
		io.Copy(io.Discard, pr)
	}()
	err := cmd.Wait()
	pw.Close()
	<-done
	if err != nil {
		return fmt.Errorf("%w: %s", err, strings.Join(tail, "; "))
	}
	return nil
}

// killGroupOnCancel makes cmd the leader of a process group of its own and
// has a cancelled context end the whole group (debootstrap's and apt's
// children, dpkg and the package scripts, too), not cmd alone.
func killGroupOnCancel(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// mirrorFailed reports whether a debootstrap error is the mirror's (a
// download that failed), worth another try.
func mirrorFailed(err error) bool {
	s := err.Error()
	for _, m := range []string{
		"Failed getting", "Couldn't download", "Temporary failure", // debootstrap
		"Failed to fetch", "Unable to fetch", "Could not connect", "Unable to connect", "Connection failed", // apt
	} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// emptyDir removes what is in dir, not dir itself.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// aptBuilder returns a builder that installs packages, with what they
// depend on and not what they only recommend, into dir, a writable
// snapshot of the debian image: the image's own apt-get runs on the host
// chrooted into dir, as debootstrap runs dpkg. Nothing is mounted in dir
// and no service starts (policy-rc.d says no). The packages downloaded are
// kept in cacheDir/apt/NAME for the next build of the image, and are not
// in the image.
func aptBuilder(cacheDir, name string, packages ...string) func(ctx context.Context, dir string, report Reporter) error {
	return func(ctx context.Context, dir string, report Reporter) error {
		cache := filepath.Join(cacheDir, "apt", name)
		if err := os.MkdirAll(cache, 0o755); err != nil {
			return err
		}
		archives := filepath.Join(dir, "var/cache/apt/archives")
		n, err := copyDebs(cache, archives)
		if err != nil {
			return fmt.Errorf("packages from the cache: %w", err)
		}
		if n > 0 {
			report.step(fmt.Sprintf("%d packages from the cache (%s)", n, cache))
		}
		policy := filepath.Join(dir, "usr/sbin/policy-rc.d")
		if err := os.WriteFile(policy, []byte("#!/bin/sh\n# cairn builds this image: no service starts\nexit 101\n"), 0o755); err != nil {
			return err
		}
		restore, err := hostResolver(dir)
		if err != nil {
			return err
		}
		install := append([]string{"install", "-y", "--no-install-recommends",
			"-o", "Dpkg::Options::=--force-unsafe-io", "-o", "Dpkg::Options::=--force-confold"}, packages...)
		// apt downloads every package before dpkg unpacks one: after a
		// mirror's failure the tree is as it was.
		err = retryMirror(ctx, report, "apt-get", func() error {
			if err := aptGet(ctx, dir, report, "update", "--error-on=any", "-o", "Acquire::Languages=none"); err != nil {
				return err
			}
			return aptGet(ctx, dir, report, install...)
		}, nil)
		if err != nil {
			return err
		}
		// Versions the mirror no longer has go; the rest is the next
		// build's, and leaves the image as apt-get clean would.
		if err := aptGet(ctx, dir, report, "autoclean"); err != nil {
			return fmt.Errorf("apt-get: %w", err)
		}
		if _, err := copyDebs(archives, cache); err != nil {
			return fmt.Errorf("packages to the cache: %w", err)
		}
		if err := pruneDebs(cache, archives); err != nil {
			return err
		}
		if err := removeDebs(archives); err != nil {
			return err
		}
		if err := restore(); err != nil {
			return err
		}
		for _, f := range []string{"usr/sbin/policy-rc.d", "var/cache/apt/pkgcache.bin", "var/cache/apt/srcpkgcache.bin"} {
			if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		return nil
	}
}

// aptGet runs the apt-get of the tree dir, chrooted into it, with an
// environment of its own: the host's proxy settings and nothing else of
// cairnd's.
func aptGet(ctx context.Context, dir string, report Reporter, args ...string) error {
	cmd := exec.CommandContext(ctx, "/usr/bin/apt-get", append([]string{"-q"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: dir}
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive"}
	for _, v := range []string{"http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"} {
		if val, ok := os.LookupEnv(v); ok {
			cmd.Env = append(cmd.Env, v+"="+val)
		}
	}
	killGroupOnCancel(cmd)
	return runWithProgress(cmd, report.step)
}

// hostResolver gives the tree dir the host's /etc/resolv.conf for as long
// as apt runs in it (the copy debootstrap made may be out of date) and
// returns what puts the tree's own back. A tree whose resolv.conf is
// anything but a regular file keeps it.
func hostResolver(dir string) (restore func() error, err error) {
	p := filepath.Join(dir, "etc/resolv.conf")
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return func() error { return nil }, nil
	}
	own, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	host, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		return func() error { return nil }, nil
	}
	if err := os.WriteFile(p, host, fi.Mode().Perm()); err != nil {
		return nil, err
	}
	return func() error { return os.WriteFile(p, own, fi.Mode().Perm()) }, nil
}

// copyDebs copies each package file of src that dst has not (by name and
// size) into dst, each written under a temporary name and then renamed,
// and returns how many it copied.
func copyDebs(src, dst string) (int, error) {
	debs, err := filepath.Glob(filepath.Join(src, "*.deb"))
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return 0, err
	}
	n := 0
	for _, from := range debs {
		fi, err := os.Lstat(from)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		to := filepath.Join(dst, filepath.Base(from))
		if have, err := os.Stat(to); err == nil && have.Size() == fi.Size() {
			continue
		}
		part := to + ".part"
		os.Remove(part)
		if err := copyFile(from, part, 0o644); err != nil {
			os.Remove(part)
			return n, err
		}
		if err := os.Rename(part, to); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// pruneDebs removes the package files of cache that keep has not.
func pruneDebs(cache, keep string) error {
	debs, err := filepath.Glob(filepath.Join(cache, "*.deb"))
	if err != nil {
		return err
	}
	for _, p := range debs {
		if _, err := os.Lstat(filepath.Join(keep, filepath.Base(p))); errors.Is(err, os.ErrNotExist) {
			if err := os.Remove(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeDebs removes the package files of an apt archives directory and
// its partial downloads.
func removeDebs(archives string) error {
	for _, pattern := range []string{"*.deb", "partial/*"} {
		files, err := filepath.Glob(filepath.Join(archives, pattern))
		if err != nil {
			return err
		}
		for _, f := range files {
			if err := os.RemoveAll(f); err != nil {
				return err
			}
		}
	}
	return nil
}
