package initd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/agent"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/initd"
)

// background starts req's command as a background process and returns its pid.
func background(t *testing.T, h *agent.Host, cmd ...string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pid, st, err := h.Exec(ctx, api.ExecRequest{Command: cmd, Background: true})
	if err != nil {
		t.Fatalf("exec %q in the background: %v", cmd, err)
	}
	if st != nil || pid <= 0 {
		t.Fatalf("background exec: pid %d, stream %v", pid, st)
	}
	return pid
}

// attached is what an attach stream carried until its Exit frame.
type attached struct {
	stdout, stderr string
	dropped        []int64 // offsets of Dropped frames
	exit           api.ExitStatus
}

// readAttach reads an attach stream until its Exit frame.
func readAttach(t *testing.T, st io.Reader) attached {
	t.Helper()
	var a attached
	var out, errOut strings.Builder
	for {
		typ, p, err := api.ReadFrame(st)
		if err != nil {
			t.Fatalf("attach stream: %v (stdout so far %q)", err, out.String())
		}
		switch typ {
		case api.FrameStdout:
			out.Write(p)
		case api.FrameStderr:
			errOut.Write(p)
		case api.FrameDropped:
			var d api.Dropped
			if err := json.Unmarshal(p, &d); err != nil {
				t.Fatal(err)
			}
			a.dropped = append(a.dropped, d.Offset)
		case api.FrameExit:
			if err := json.Unmarshal(p, &a.exit); err != nil {
				t.Fatal(err)
			}
			a.stdout, a.stderr = out.String(), errOut.String()
			return a
		default:
			t.Fatalf("unexpected frame %d", typ)
		}
	}
}

func findProcess(t *testing.T, h *agent.Host, pid int) (api.Process, bool) {
	t.Helper()
	list, err := h.Processes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list {
		if p.PID == pid {
			return p, true
		}
	}
	return api.Process{}, false
}

// A background process is listed, attached to by two streams from offset
// 0 (each gets every line), signalled, and its exit seen by both and by
// wait; it is kept after exit until read.
func TestBackgroundProcessAttachSignalWait(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	pid := background(t, h, "sh", "-c", `trap 'echo term >&2; exit 3' TERM; i=0; while :; do echo $i; i=$((i+1)); sleep 0.05; done`)
	p, ok := findProcess(t, h, pid)
	if !ok || !p.Background || p.State != api.ProcessRunning || p.Command[0] != "sh" || !p.StdinOpen {
		t.Fatalf("listed %+v (found %v), want a running background sh", p, ok)
	}
	// Two attaches at once, from offset 0.
	var streams []io.ReadWriteCloser
	for range 2 {
		got, st, err := h.AttachProcess(ctx, pid, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if got.Offset != 0 {
			t.Fatalf("attach offset %d, want 0", got.Offset)
		}
		streams = append(streams, st)
	}
	for _, st := range streams {
		readUntil(t, st, "0\n1\n2\n3\n")
	}
	if err := h.SignalProcess(ctx, pid, int(unix.SIGTERM)); err != nil {
		t.Fatal(err)
	}
	for _, st := range streams {
		a := readAttach(t, st)
		if a.exit.Code != 3 || !strings.Contains(a.stderr, "term") {
			t.Errorf("attach: exit %+v, stderr %q; want code 3 after the trap", a.exit, a.stderr)
		}
	}
	w, err := h.WaitProcess(ctx, pid)
	if err != nil || w.State != api.ProcessExited || w.Exit == nil || w.Exit.Code != 3 {
		t.Fatalf("wait: %+v, %v", w, err)
	}
	// Exited and read: still listed for a while, with its whole output.
	p, ok = findProcess(t, h, pid)
	if !ok || p.State != api.ProcessExited || p.OutputBytes == 0 {
		t.Fatalf("after exit: %+v (found %v)", p, ok)
	}
	_, st, err := h.AttachProcess(ctx, pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	a := readAttach(t, st)
	st.Close()
	if !strings.HasPrefix(a.stdout, "0\n1\n2\n3\n") || a.exit.Code != 3 {
		t.Errorf("attach after exit: stdout %q, exit %+v", a.stdout, a.exit)
	}
	if err := h.SignalProcess(ctx, pid, int(unix.SIGTERM)); !errdefs.Is(err, api.CodeProcessExited) {
		t.Errorf("signal after exit: %v, want S13", err)
	}
	if err := h.WriteStdin(ctx, pid, []byte("x"), false); !errdefs.Is(err, api.CodeProcessExited) {
		t.Errorf("stdin after exit: %v, want S13", err)
	}
}

// Kept output: a process killed by a signal reports it; output written
// before anyone attached is there from offset 0; an attach from an
// offset starts there.
func TestBackgroundProcessOutputKept(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	pid := background(t, h, "sh", "-c", `echo hello; sleep 0.2; echo oops >&2; exec sleep 60`)
	deadline := time.Now().Add(5 * time.Second)
	for {
		p, _ := findProcess(t, h, pid)
		if p.OutputBytes == 11 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("output bytes %d, want 11", p.OutputBytes)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := h.SignalProcess(ctx, pid, int(unix.SIGKILL)); err != nil {
		t.Fatal(err)
	}
	w, err := h.WaitProcess(ctx, pid)
	if err != nil || w.Exit == nil || w.Exit.Code != 137 || w.Exit.Signal != "SIGKILL" {
		t.Fatalf("wait: %+v, %v; want 137 SIGKILL", w.Exit, err)
	}
	_, st, err := h.AttachProcess(ctx, pid, 2)
	if err != nil {
		t.Fatal(err)
	}
	a := readAttach(t, st)
	st.Close()
	if a.stdout != "llo\n" || a.stderr != "oops\n" || a.exit.Code != 137 {
		t.Errorf("attach from 2: %+v", a)
	}
	if _, _, err := h.AttachProcess(ctx, pid, 12); !errdefs.Is(err, api.CodeInvalidArgument) {
		t.Errorf("attach past the end: %v, want V02", err)
	}
}

// Stdin: writes reach the process, in order, from the API and from an
// attach stream; closing it ends cat.
func TestBackgroundProcessStdin(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	pid := background(t, h, "cat")
	_, st, err := h.AttachProcess(ctx, pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := h.WriteStdin(ctx, pid, []byte("one\n"), false); err != nil {
		t.Fatal(err)
	}
	readUntil(t, st, "one\n")
	send(t, st, api.FrameStdin, []byte("two\n"))
	readUntil(t, st, "two\n")
	big := strings.Repeat("x", 3*api.MaxStdinChunk+5) // several chunks
	if err := h.WriteStdin(ctx, pid, []byte(big), true); err != nil {
		t.Fatal(err)
	}
	a := readAttach(t, st)
	if a.stdout != big || a.exit.Code != 0 {
		t.Errorf("after close: %d bytes, exit %+v", len(a.stdout), a.exit)
	}
	if err := h.WriteStdin(ctx, pid, []byte("late"), false); !errdefs.Is(err, api.CodeProcessExited) {
		t.Errorf("write after exit: %v, want S13", err)
	}
}

// A closed stdin is refused; a process that does not read its stdin
// makes a write fail after StdinWait (not tested: 10 s).
func TestBackgroundProcessStdinClosed(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	pid := background(t, h, "sleep", "60")
	if err := h.WriteStdin(ctx, pid, nil, true); err != nil {
		t.Fatal(err)
	}
	if err := h.WriteStdin(ctx, pid, []byte("x"), false); !errdefs.Is(err, api.CodeStdinClosed) {
		t.Errorf("write after close: %v, want S15", err)
	}
	if err := h.SignalProcess(ctx, pid, int(unix.SIGKILL)); err != nil {
		t.Fatal(err)
	}
}

// The ring keeps the last MaxProcessOutput bytes: an attach from 0 gets a
// Dropped frame first, then the end of the output.
func TestBackgroundProcessRingDrops(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	total := api.MaxProcessOutput + 100000
	pid := background(t, h, "sh", "-c", fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a; echo end", total))
	if _, err := h.WaitProcess(ctx, pid); err != nil {
		t.Fatal(err)
	}
	p, _ := findProcess(t, h, pid)
	if p.OutputBytes != int64(total+4) || p.OutputStart != p.OutputBytes-api.MaxProcessOutput {
		t.Fatalf("output %d, start %d; want %d, %d", p.OutputBytes, p.OutputStart, total+4, total+4-api.MaxProcessOutput)
	}
	got, st, err := h.AttachProcess(ctx, pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	a := readAttach(t, st)
	st.Close()
	if got.Offset != p.OutputStart || len(a.dropped) != 1 || a.dropped[0] != p.OutputStart ||
		len(a.stdout) != api.MaxProcessOutput || !strings.HasSuffix(a.stdout, "aend\n") {
		t.Errorf("attach: offset %d, dropped %v, %d bytes", got.Offset, a.dropped, len(a.stdout))
	}
}

// The processes list shows attached execs that run; they can be
// signalled but not attached to, written to or waited for; an unknown
// pid is S12.
func TestProcessesListAttachedExec(t *testing.T) {
	h := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pid, st, err := h.Exec(ctx, api.ExecRequest{Command: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, ok := findProcess(t, h, pid)
	if !ok || p.Background || p.State != api.ProcessRunning || p.Command[1] != "60" {
		t.Fatalf("listed %+v (found %v)", p, ok)
	}
	if _, _, err := h.AttachProcess(ctx, pid, 0); !errdefs.Is(err, api.CodeNotBackground) {
		t.Errorf("attach: %v, want S14", err)
	}
	if _, err := h.WaitProcess(ctx, pid); !errdefs.Is(err, api.CodeNotBackground) {
		t.Errorf("wait: %v, want S14", err)
	}
	if err := h.SignalProcess(ctx, pid, int(unix.SIGTERM)); err != nil {
		t.Fatal(err)
	}
	r := collect(t, st)
	if r.exit.Signal != "SIGTERM" {
		t.Errorf("exit %+v, want SIGTERM", r.exit)
	}
	for _, err := range []error{
		func() error { _, err := h.Process(ctx, 999999); return err }(),
		h.SignalProcess(ctx, 999999, 15),
	} {
		if !errdefs.Is(err, api.CodeNoProcess) {
			t.Errorf("unknown pid: %v, want S12", err)
		}
	}
	if err := h.SignalProcess(ctx, 1, 0); !errdefs.Is(err, api.CodeInvalidArgument) {
		t.Errorf("signal 0: %v, want V02", err)
	}
}

// A background exec with a timeout is killed at it; its status says so.
func TestBackgroundProcessTimeout(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	pid, _, err := h.Exec(ctx, api.ExecRequest{Command: []string{"sleep", "60"}, Background: true, TimeoutSeconds: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	w, err := h.WaitProcess(ctx, pid)
	if err != nil || w.Exit == nil || !w.Exit.TimedOut || w.Exit.Code != api.ExitTimedOut {
		t.Fatalf("wait: %+v, %v", w.Exit, err)
	}
	if _, _, err := h.Exec(ctx, api.ExecRequest{Command: []string{"true"}, Background: true, TTY: true}); !errdefs.Is(err, api.CodeInvalidArgument) {
		t.Errorf("background with tty: %v, want V02", err)
	}
}

// An attach to a background process that streams across broken
// connections gets every line once, in order, and the exit code: the
// Host attaches again from the offset it reached.
func TestProcessAttachSurvivesBrokenConnections(t *testing.T) {
	h, p := startProxied(t, initd.Config{}, agent.ListenConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pid := background(t, h, "sh", "-c", `i=1; while [ $i -le 200 ]; do echo $i; i=$((i+1)); sleep 0.01; done; exit 7`)
	_, st, err := h.AttachProcess(ctx, pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r := readInBackground(st)
	r.waitFor(t, "\n10\n")
	for i := range 6 {
		p.breakConns(i%2 == 0, 50*time.Millisecond)
		p.waitConnections(t, i+2)
		time.Sleep(50 * time.Millisecond)
	}
	out, exit, err := r.wait(t)
	if err != nil || out != numbered(1, 200) || exit != (api.ExitStatus{Code: 7}) {
		t.Errorf("got %q, %+v, %v; want 1..200 and code 7", out, exit, err)
	}
}
