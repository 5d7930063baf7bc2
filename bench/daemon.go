package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-sandbox/cairn/client"
)

// benchDaemon is a cairnd on a throw-away data dir.
type benchDaemon struct {
	dataDir string
	cmd     *exec.Cmd
	client  *client.Client
}

func startDaemon(binDir string) (*benchDaemon, error) {
	dir, err := os.MkdirTemp("", "cairn-bench-")
	if err != nil {
		return nil, err
	}
	d := &benchDaemon{dataDir: dir}
	sock := filepath.Join(dir, "cairn.sock")
	logf, err := os.Create(filepath.Join(dir, "cairnd.log"))
	if err != nil {
		return nil, err
	}
	d.cmd = exec.Command(filepath.Join(binDir, "cairnd"), "--data-dir", dir, "--socket", sock, "--pool-size", "16G")
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	d.client = client.New(sock)
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := d.client.ServerInfo(ctx)
		cancel()
		if err == nil {
			return d, nil
		}
		if i > 600 {
			d.stop()
			return nil, fmt.Errorf("cairnd did not start: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop deletes the sandboxes, stops cairnd and removes everything it made.
func (d *benchDaemon) stop() {
	ctx := context.Background()
	if list, err := d.client.Sandboxes(ctx, ""); err == nil {
		for _, sb := range list {
			if op, err := d.client.DeleteSandbox(ctx, sb.Name); err == nil {
				d.client.Follow(ctx, op, nil)
			}
		}
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	d.cmd.Wait()
	for _, root := range []string{filepath.Join(d.dataDir, "runsc"), filepath.Join(d.dataDir, "bare", "state")} {
		if out, err := exec.Command("runsc", "--root", root, "list", "--quiet").Output(); err == nil {
			for _, id := range strings.Fields(string(out)) {
				exec.Command("runsc", "--root", root, "delete", "--force", id).Run()
			}
		}
	}
	for _, m := range []string{"runsc/null-netns", "bare/state/null-netns", "pool"} {
		exec.Command("umount", filepath.Join(d.dataDir, m)).Run()
	}
	os.RemoveAll(d.dataDir)
}
