package runsc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A launch of this state root left running (by a killed cairnd) is waited
// for; one of another state root is not.
func TestSettleLaunchesWaitsForLeftovers(t *testing.T) {
	r := New("/nonexistent/runsc", t.TempDir())
	other := exec.Command("sh", "-c", "sleep 5", "--root="+t.TempDir(), "--detach")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()
	if n, err := r.SettleLaunches(context.Background()); n != 0 || err != nil {
		t.Fatalf("SettleLaunches with another root's launch only = %d, %v; want 0", n, err)
	}

	// A shell that forks nothing (read is built in), so that no child
	// shows the same command line for an instant; it ends half a second
	// on, when its input closes.
	left := exec.Command("sh", "-c", "read x", "--root="+r.stateRoot, "--detach")
	in, err := left.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := left.Start(); err != nil {
		t.Fatal(err)
	}
	// Under load the child may not have exec'd yet: until it has, its
	// command line is the test binary's, and no launch shows.
	for deadline := time.Now().Add(5 * time.Second); ; {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", left.Process.Pid))
		if strings.Contains(string(cmdline), r.stateRoot) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the launch's command line never showed: %q", cmdline)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.AfterFunc(500*time.Millisecond, func() { in.Close() })
	exited := make(chan struct{})
	go func() { left.Wait(); close(exited) }()
	t0 := time.Now()
	n, err := r.SettleLaunches(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("SettleLaunches = %d, %v; want 1", n, err)
	}
	if d := time.Since(t0); d < 300*time.Millisecond {
		t.Errorf("SettleLaunches returned after %v, before the launch ended", d)
	}
	select {
	case <-exited:
	case <-time.After(2 * time.Second):
		t.Error("the launch still runs after SettleLaunches returned")
	}
}
