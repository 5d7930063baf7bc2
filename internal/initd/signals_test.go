package initd_test

import (
	"context"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/agent"
	"github.com/cairn-sandbox/cairn/internal/initd"
)

// These tests signal the test process itself: initd catches the signals.

func TestSignalsAreForwarded(t *testing.T) {
	h := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, st, err := h.Exec(ctx, api.ExecRequest{Command: []string{"sh", "-c",
		`trap 'echo usr1; exit 7' USR1; echo ready; while :; do sleep 0.05; done`}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	readUntil(t, st, "ready")
	if err := unix.Kill(os.Getpid(), unix.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if r := collect(t, st); r.stdout != "usr1\n" || r.exit.Code != 7 {
		t.Errorf("got %+v", r)
	}
}

func TestSIGTERMEndsEverything(t *testing.T) {
	sock := socketPath(t)
	h, err := agent.Listen(sock, keyFile(t, sock))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	r := startInit(t, initd.Config{SocketPath: sock, TermGrace: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	polite, _, err := h.Exec(ctx, api.ExecRequest{Command: []string{"sleep", "30"}, Detach: true})
	if err != nil {
		t.Fatal(err)
	}
	stubborn, _, err := h.Exec(ctx, api.ExecRequest{Command: []string{"sh", "-c", "trap '' TERM; sleep 30"}, Detach: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Kill(os.Getpid(), unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.done:
		if r.err != nil {
			t.Errorf("Run: %v", r.err)
		}
	case <-ctx.Done():
		t.Fatal("initd.Run did not return after SIGTERM")
	}
	for _, pid := range []int{polite, stubborn} {
		if s := procState(t, pid); s != "" {
			t.Errorf("pid %d still there, state %s", pid, s)
		}
	}
}
