package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/api"
)

// canonical reports whether the terminal on fd is in canonical (cooked)
// mode, i.e. not raw.
func canonical(t *testing.T, fd int) bool {
	t.Helper()
	tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		t.Errorf("read terminal mode: %v", err) // may run in a handler: no Fatal
		return false
	}
	return tio.Lflag&unix.ICANON != 0
}

// TestExecTTY runs cairn exec -i -t on a pseudo-terminal: the terminal is
// raw while the command runs and restored after, also when exec fails; the
// initial size goes with the request and a SIGWINCH sends a resize.
func TestExecTTY(t *testing.T) {
	ptm, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	defer ptm.Close()
	defer tty.Close()
	go io.Copy(io.Discard, ptm)
	if err := pty.Setsize(tty, &pty.Winsize{Rows: 40, Cols: 100}); err != nil {
		t.Fatal(err)
	}
	ttyFd := int(tty.Fd())

	var (
		req       api.ExecRequest
		rawDuring bool
		gotResize api.Resize
		resizeErr error
	)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/web/exec", func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&req)
		rawDuring = !canonical(t, ttyFd)
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(buf, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: cairn-exec\r\nConnection: Upgrade\r\n\r\n")
		buf.Flush()
		// The window changes size.
		pty.Setsize(tty, &pty.Winsize{Rows: 50, Cols: 120})
		syscall.Kill(os.Getpid(), syscall.SIGWINCH)
		resizeErr = readResize(buf.Reader, &gotResize)
		st, _ := json.Marshal(api.ExitStatus{Code: 0})
		api.WriteFrame(buf, api.FrameExit, st)
		buf.Flush()
	})
	mux.HandleFunc("POST /v1/sandboxes/stopped/exec", func(w http.ResponseWriter, r *http.Request) {
		rawDuring = !canonical(t, ttyFd)
		writeAPIError(w, 409, api.CodeNotRunning, "sandbox stopped is not running")
	})
	g := newGlobalOptions(tty, tty, io.Discard)
	g.Socket = fakeDaemon(t, mux)

	if !canonical(t, ttyFd) {
		t.Fatal("the pty does not start in canonical mode")
	}
	opts := execOptions{Name: "web", Command: []string{"/bin/sh"}, Interactive: true, TTY: true}
	if err := runExec(context.Background(), opts, g); err != nil {
		t.Fatal(err)
	}
	if !rawDuring || !canonical(t, ttyFd) {
		t.Errorf("raw while running: %v, canonical after: %v; want both", rawDuring, canonical(t, ttyFd))
	}
	if req.Rows != 40 || req.Cols != 100 || !req.TTY || !req.Stdin {
		t.Errorf("request %+v, want a tty of 40x100 with stdin", req)
	}
	if resizeErr != nil || gotResize != (api.Resize{Rows: 50, Cols: 120}) {
		t.Errorf("resize %+v (%v), want 50x120", gotResize, resizeErr)
	}

	opts.Name = "stopped"
	rawDuring = false
	err = runExec(context.Background(), opts, g)
	if code := g.report(nil, err); code != exitExecFailed {
		t.Errorf("exit %d, want %d", code, exitExecFailed)
	}
	if !rawDuring || !canonical(t, ttyFd) {
		t.Errorf("failed exec: raw while running: %v, canonical after: %v; want both", rawDuring, canonical(t, ttyFd))
	}
}

// readResize reads client frames until a resize.
func readResize(r *bufio.Reader, out *api.Resize) error {
	for {
		typ, p, err := api.ReadFrame(r)
		if err != nil {
			return err
		}
		if typ == api.FrameResize {
			return json.Unmarshal(p, out)
		}
	}
}
