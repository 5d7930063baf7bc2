package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/agent"
	"github.com/cairn-sandbox/cairn/internal/agentauth"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/initd"
)

// The tests run a real cairn-init (initd.Run) in the test process, one at
// a time: its reaper waits for every child of the process.

func socketPath(t *testing.T) string {
	dir, err := os.MkdirTemp("", "cairn-agent")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "agent.sock")
}

func listen(t *testing.T, sock string) *agent.Host {
	t.Helper()
	h, err := agent.Listen(sock, keyFile(t, sock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// startInit runs cairn-init dialing sock until the test ends. The returned
// channel is closed when it has returned.
func startInit(t *testing.T, sock string) <-chan struct{} {
	t.Helper()
	return startInitWith(t, initd.Config{SocketPath: sock})
}

// startInitWith is startInit with cfg; services are taken from and log to
// temporary directories unless it says otherwise.
func startInitWith(t *testing.T, cfg initd.Config) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg.Version = "test"
	if cfg.Key == (agentauth.Key{}) {
		cfg.Key = keyOf(t, cfg.SocketPath)
	}
	cfg.Log = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	if cfg.ServicesDir == "" {
		cfg.ServicesDir = t.TempDir()
	}
	if cfg.LogDir == "" {
		cfg.LogDir = t.TempDir()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := initd.Run(ctx, cfg); err != nil {
			t.Errorf("initd.Run: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return done
}

func timeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// echo runs echo through h and checks its output.
func echo(t *testing.T, h *agent.Host) {
	t.Helper()
	_, st, err := h.Exec(timeout(t, 5*time.Second), api.ExecRequest{Command: []string{"echo", "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var out bytes.Buffer
	for {
		typ, payload, err := api.ReadFrame(st)
		if err != nil {
			t.Fatalf("read frame: %v", err)
		}
		if typ == api.FrameExit {
			var status api.ExitStatus
			if err := json.Unmarshal(payload, &status); err != nil || status.Code != 0 || out.String() != "hi\n" {
				t.Fatalf("echo hi: %q, %+v, %v", out.String(), status, err)
			}
			return
		}
		out.Write(payload)
	}
}

// alive reports whether pid runs (is neither gone nor a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	return err == nil && !regexp.MustCompile(`\) [ZX] `).Match(b)
}

func TestOpsWaitForAConnection(t *testing.T) {
	sock := socketPath(t)
	h := listen(t, sock)
	if h.Connected() {
		t.Fatal("connected without an agent")
	}
	_, err := h.Ping(timeout(t, 50*time.Millisecond))
	if !errors.Is(err, context.DeadlineExceeded) || !errdefs.Is(err, api.CodeAgentUnreachable) ||
		err.Error() != "agent not connected: context deadline exceeded" {
		t.Fatalf("ping without agent: %v", err)
	}

	// An exec issued before cairn-init connects runs once it does.
	done := make(chan error, 1)
	go func() {
		_, _, err := h.Exec(timeout(t, 5*time.Second), api.ExecRequest{Command: []string{"true"}, Detach: true})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	startInit(t, sock)
	if err := <-done; err != nil {
		t.Fatalf("exec waiting for the agent: %v", err)
	}
	if !h.Connected() {
		t.Error("not connected")
	}
}

func TestPing(t *testing.T) {
	sock := socketPath(t)
	h := listen(t, sock)
	startInit(t, sock)
	if err := h.WaitConnected(timeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	info, err := h.Ping(timeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if info.Version != "test" || info.PID != os.Getpid() || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(info.BootID) {
		t.Errorf("ping: %+v", info)
	}
}

func TestReconnect(t *testing.T) {
	sock := socketPath(t)
	h := listen(t, sock)
	startInit(t, sock)
	if err := h.WaitConnected(timeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	before, err := h.Ping(timeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	pid, _, err := h.Exec(timeout(t, 5*time.Second), api.ExecRequest{Command: []string{"sleep", "30"}, Detach: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Kill(pid, unix.SIGKILL) })

	// cairnd goes away and comes back on the same path.
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Ping(timeout(t, time.Second)); !errors.Is(err, agent.ErrClosed) {
		t.Errorf("ping on a closed host: %v", err)
	}
	h = listen(t, sock)
	if err := h.WaitConnected(timeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	echo(t, h)
	after, err := h.Ping(timeout(t, 5*time.Second))
	if err != nil || after.BootID != before.BootID {
		t.Errorf("after reconnect: %+v, %v; before %+v", after, err, before)
	}
	if !alive(pid) {
		t.Errorf("detached process %d did not survive the reconnect", pid)
	}
}

func TestShutdown(t *testing.T) {
	sock := socketPath(t)
	h := listen(t, sock)
	done := startInit(t, sock)
	ctx := timeout(t, 5*time.Second)
	pid, _, err := h.Exec(ctx, api.ExecRequest{Command: []string{"sh", "-c", "trap '' TERM; sleep 30"}, Detach: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Shutdown(ctx, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Errorf("pid %d survived shutdown", pid)
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("cairn-init did not exit")
	}
	for h.Connected() {
		if ctx.Err() != nil {
			t.Fatal("still connected after shutdown")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSync(t *testing.T) {
	sock := socketPath(t)
	h := listen(t, sock)
	startInit(t, sock)
	if err := h.Sync(timeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
}

func TestServices(t *testing.T) {
	sock := socketPath(t)
	h := listen(t, sock)
	dir, logs := t.TempDir(), t.TempDir()
	def := `{"name":"web","cmd":["sh","-c","echo listening; exec sleep 30"],"restart":"always"}`
	if err := os.WriteFile(filepath.Join(dir, "web.json"), []byte(def), 0o644); err != nil {
		t.Fatal(err)
	}
	startInitWith(t, initd.Config{SocketPath: sock, ServicesDir: dir, LogDir: logs})
	ctx := timeout(t, 10*time.Second)

	list, err := h.Services(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != "web" || list[0].State != api.ServiceRunning || list[0].PID == 0 ||
		list[0].Restart != api.ServiceRestartAlways || len(list[0].Cmd) != 3 {
		t.Fatalf("services: %+v", list)
	}
	var b []byte
	for !bytes.HasSuffix(b, []byte("\nlistening\n")) {
		if b, err = h.ServiceLogs(ctx, "web", 0); err != nil || ctx.Err() != nil {
			t.Fatalf("logs: %q, %v", b, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !regexp.MustCompile(`^--- cairn: started pid \d+ at `).Match(b) {
		t.Errorf("logs: %q", b)
	}
	if b, err := h.ServiceLogs(ctx, "web", 10); string(b) != "listening\n" || err != nil {
		t.Errorf("tail 10: %q, %v", b, err)
	}

	if _, err := h.ServiceLogs(ctx, "../web", 0); !errdefs.Is(err, api.CodeInvalidArgument) ||
		err.Error() != `invalid service name "../web": must match `+api.ServiceNamePattern {
		t.Errorf("../web: %v", err)
	}
	var nse *agent.NoServiceError
	if _, err := h.ServiceLogs(ctx, "db", 0); !errors.As(err, &nse) || nse.Name != "db" || err.Error() != `no service "db"` {
		t.Errorf("db: %v", err)
	}
}

// An exec stream whose cairn-init does not come back within ReattachWait
// ends with ErrSessionLost.
func TestExecSessionLost(t *testing.T) {
	sock := socketPath(t)
	h, err := agent.ListenConfig{KeyFile: keyFile(t, sock), ReattachWait: 200 * time.Millisecond}.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	ctx, stopInit := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = initd.Run(ctx, initd.Config{SocketPath: sock, Key: keyOf(t, sock), ServicesDir: t.TempDir(), LogDir: t.TempDir(),
			Log: slog.New(slog.NewTextHandler(t.Output(), nil))})
	}()
	t.Cleanup(func() {
		stopInit()
		<-done
	})
	pid, st, err := h.Exec(timeout(t, 10*time.Second), api.ExecRequest{Command: []string{"sh", "-c", "echo ready; exec sleep 30"}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if typ, payload, err := api.ReadFrame(st); typ != api.FrameStdout || string(payload) != "ready\n" || err != nil {
		t.Fatalf("first frame: %d %q %v", typ, payload, err)
	}
	stopInit() // hangs the command up; its stream breaks before the Exit frame
	<-done
	if alive(pid) {
		t.Errorf("pid %d survived cairn-init", pid)
	}
	start := time.Now()
	_, _, err = api.ReadFrame(st)
	if !errors.Is(err, agent.ErrSessionLost) || !errdefs.Is(err, api.CodeAgentUnreachable) ||
		!errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("read after cairn-init went: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("lost after %s", d)
	}
	// Writes fail too, and Close does not wait.
	if err := api.WriteFrame(st, api.FrameStdin, []byte("x")); !errors.Is(err, agent.ErrSessionLost) {
		t.Errorf("write after the session was lost: %v", err)
	}
}

// Closing the Host ends an exec stream that waits to re-attach.
func TestExecSessionLostWhenHostCloses(t *testing.T) {
	sock := socketPath(t)
	h := listen(t, sock)
	ctx, stopInit := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = initd.Run(ctx, initd.Config{SocketPath: sock, Key: keyOf(t, sock), ServicesDir: t.TempDir(), LogDir: t.TempDir(),
			Log: slog.New(slog.NewTextHandler(t.Output(), nil))})
	}()
	t.Cleanup(func() {
		stopInit()
		<-done
	})
	_, st, err := h.Exec(timeout(t, 10*time.Second), api.ExecRequest{Command: []string{"sh", "-c", "echo ready; exec sleep 30"}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, _, err := api.ReadFrame(st); err != nil {
		t.Fatal(err)
	}
	stopInit()
	<-done
	time.AfterFunc(100*time.Millisecond, func() { h.Close() })
	if _, _, err := api.ReadFrame(st); !errors.Is(err, agent.ErrSessionLost) || !errors.Is(err, agent.ErrClosed) {
		t.Errorf("read after the host closed: %v", err)
	}
}
