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
		// release file") is tried again, from an empty tree, twice.
		for try := 1; ; try++ {
			cmd := exec.CommandContext(ctx, "debootstrap", "--variant=minbase",
				"--include=procps,curl,sqlite3,ca-certificates",
				"--cache-dir="+debs, "bookworm", dir, "http://deb.debian.org/debian")
			err := runWithProgress(cmd, report.step)
			if err == nil {
				break
			}
			if try == 3 || ctx.Err() != nil || !mirrorFailed(err) {
				return fmt.Errorf("debootstrap: %w", err)
			}
			report.step(fmt.Sprintf("The Debian mirror failed (%v); trying again (%d of 3)", err, try+1))
			if err := emptyDir(dir); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(try) * 2 * time.Second):
			}
		}
		// runsc sets the live hostname per sandbox; this is the fallback.
		return os.WriteFile(filepath.Join(dir, "etc/hostname"), []byte("cairn\n"), 0o644)
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
	return strings.Contains(s, "Failed getting release file") || strings.Contains(s, "Couldn't download") ||
		strings.Contains(s, "Failed getting") || strings.Contains(s, "Temporary failure")
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
