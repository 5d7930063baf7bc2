package runsc

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/container"
	"github.com/cairn-sandbox/cairn/internal/network/nsfile"
)

// The network mode is the sandbox's own: it reaches runsc run (and restore)
// as that container's --network, and an unknown mode is refused before
// anything is started.
func TestNetworkModeIsPerSandbox(t *testing.T) {
	bin := requireRunsc(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	r := New(bin, newStateRoot(t, filepath.Join(dir, "state")))
	calls := filepath.Join(dir, "calls")
	wrapper := filepath.Join(dir, "runsc-wrapper")
	script := "#!/bin/sh\necho \"$@\" >> " + calls + "\nexec " + bin + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r.binary = wrapper

	bad := busyboxSpec(t, dir, "bad", "sleep 1")
	bad.Network = "bridge"
	if _, err := r.Start(ctx, bad); err == nil || !strings.Contains(err.Error(), "unknown network mode") {
		t.Fatalf("start with an unknown network mode: %v", err)
	}
	if b, _ := os.ReadFile(calls); strings.Contains(string(b), " run ") {
		t.Fatalf("runsc was run for an unknown mode:\n%s", b)
	}

	// The sandbox's own stack never runs without a namespace made for it:
	// it would be the host's, or an empty one by mistake.
	bare := busyboxSpec(t, dir, "bare", "sleep 1")
	bare.Network = container.NetworkSandbox
	if _, err := r.Start(ctx, bare); err == nil || !strings.Contains(err.Error(), "without a network namespace") {
		t.Fatalf("start in mode sandbox without a namespace: %v", err)
	}
	netns := filepath.Join(dir, "netns")
	if err := nsfile.New(netns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nsfile.Remove(netns) })

	for _, mode := range []container.Network{container.NetworkNone, container.NetworkSandbox} {
		id := "net-" + string(mode)
		spec := busyboxSpec(t, dir, id, "sleep 30")
		spec.Network = mode
		if mode == container.NetworkSandbox {
			spec.NetNS = netns
		}
		if _, err := r.Start(ctx, spec); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Delete(context.Background(), id) })
		b, _ := os.ReadFile(calls)
		var run string
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, " run ") && strings.HasSuffix(line, " "+id) {
				run = line
			}
		}
		if !strings.Contains(run, "--network="+string(mode)+" ") {
			t.Fatalf("runsc run of a %s sandbox: %q", mode, run)
		}
	}
}
