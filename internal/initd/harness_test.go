package initd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/agent"
	"github.com/cairn-sandbox/cairn/internal/agentauth"
	"github.com/cairn-sandbox/cairn/internal/initd"
)

// The tests run cairn-init in the test process (not as PID 1: it makes
// itself a child subreaper). Its reaper waits for every child of the
// process, so the tests start no processes of their own, and they run one
// at a time.

// socketPath returns a short path for a unix socket (at most 108 bytes).
func socketPath(t *testing.T) string {
	dir, err := os.MkdirTemp("", "cairn-initd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "agent.sock")
}

// running is one initd.Run of a test.
type running struct {
	done chan struct{} // closed when Run returns
	err  error         // what it returned
}

// startInit runs initd.Run with cfg until the test ends.
func startInit(t *testing.T, cfg initd.Config) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg.Version = "test"
	if cfg.Key == (agentauth.Key{}) {
		cfg.Key = keyOf(t, cfg.SocketPath)
	}
	if cfg.ServicesDir == "" { // not the machine's own
		cfg.ServicesDir = t.TempDir()
	}
	if cfg.LogDir == "" {
		cfg.LogDir = t.TempDir()
	}
	cfg.Log = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	r := &running{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = initd.Run(ctx, cfg)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			t.Error("initd.Run did not return")
		}
	})
	return r
}

// start runs cairn-init and a Host it is connected to.
func start(t *testing.T) *agent.Host {
	t.Helper()
	return startWith(t, initd.Config{})
}

// startWith is start with cfg (but for its socket path).
func startWith(t *testing.T, cfg initd.Config) *agent.Host {
	t.Helper()
	sock := socketPath(t)
	h, err := agent.Listen(sock, keyFile(t, sock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	cfg.SocketPath = sock
	startInit(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	return h
}

// result is what an attached exec produced.
type result struct {
	stdout, stderr string
	exit           api.ExitStatus
}

// run execs req and collects its output until the Exit frame.
func run(t *testing.T, h *agent.Host, req api.ExecRequest) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, st, err := h.Exec(ctx, req)
	if err != nil {
		t.Fatalf("exec %q: %v", req.Command, err)
	}
	defer st.Close()
	return collect(t, st)
}

// collect reads frames until the Exit frame.
func collect(t *testing.T, st io.Reader) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	for {
		typ, payload, err := api.ReadFrame(st)
		if err != nil {
			t.Fatalf("read frame: %v (stdout so far %q)", err, stdout.String())
		}
		switch typ {
		case api.FrameStdout:
			stdout.Write(payload)
		case api.FrameStderr:
			stderr.Write(payload)
		case api.FrameExit:
			var r result
			if err := json.Unmarshal(payload, &r.exit); err != nil {
				t.Fatal(err)
			}
			r.stdout, r.stderr = stdout.String(), stderr.String()
			if _, _, err := api.ReadFrame(st); !errors.Is(err, io.EOF) {
				t.Errorf("after the exit frame: %v, want EOF", err)
			}
			return r
		default:
			t.Fatalf("unexpected frame type %d", typ)
		}
	}
}

// readUntil reads output frames until their text contains want.
func readUntil(t *testing.T, st io.Reader, want string) {
	t.Helper()
	var out strings.Builder
	for !strings.Contains(out.String(), want) {
		typ, payload, err := api.ReadFrame(st)
		if err != nil || typ == api.FrameExit {
			t.Fatalf("waiting for %q: frame %d %q, %v", want, typ, payload, err)
		}
		out.Write(payload)
	}
}

func send(t *testing.T, st io.Writer, typ api.FrameType, payload []byte) {
	t.Helper()
	if err := api.WriteFrame(st, typ, payload); err != nil {
		t.Fatal(err)
	}
}

// procState returns the state letter of pid from /proc ("Z": zombie), or
// "" once the process is gone.
func procState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) { // ESRCH: it went while we read
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return rest[:1]
}

// waitGone waits until pid is gone: exited and reaped.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for procState(t, pid) != "" {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still there, state %q", pid, procState(t, pid))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
