package main

import (
	"context"
	"fmt"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// benchWake measures how long an exec takes to answer on a sandbox that
// went to sleep when idle (--idle: its session saved, holding 256 MiB of
// memory), against the same resume by hand (cairn start of the saved
// session, then the exec) and an exec on a sandbox awake.
func benchWake(ctx context.Context, e *env) error {
	const name, idle = "sleeper", time.Second
	n := e.n
	fmt.Printf("== wake from sleep: %d iterations, 256 MiB in memory\n\n", n)
	if err := createSandboxReq(ctx, e.c, api.CreateSandboxRequest{Name: name, Idle: idle.String(), AutoCheckpoint: "24h"}); err != nil {
		return err
	}
	defer deleteSandbox(context.WithoutCancel(ctx), e.c, name)
	// Memory the session must keep: a file of a memory file system.
	if _, err := execSh(ctx, e.c, name, "head -c 268435456 /dev/zero > /dev/shm/fill"); err != nil {
		return err
	}
	asleep := func() error {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			sb, err := e.c.Sandbox(ctx, name)
			if err != nil {
				return err
			}
			if sb.State == api.StateSleeping {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s did not fall asleep within 2 min (state %s)", name, sb.State)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var wake, byHand, awake []time.Duration
	for range n {
		if err := asleep(); err != nil {
			return err
		}
		t0 := time.Now()
		if err := execTrue(ctx, e.c, name); err != nil {
			return err
		}
		wake = append(wake, time.Since(t0))
		t0 = time.Now()
		if err := execTrue(ctx, e.c, name); err != nil {
			return err
		}
		awake = append(awake, time.Since(t0))
	}
	// By hand: stop --snapshot, then time start + exec.
	if _, err := e.c.ConfigureSandbox(ctx, name, api.ConfigureSandboxRequest{Idle: "0"}); err != nil {
		return err
	}
	if err := execTrue(ctx, e.c, name); err != nil { // awake, to stop it by hand
		return err
	}
	for range n {
		op, err := e.c.StopSandbox(ctx, name, api.StopRequest{Snapshot: true})
		if err != nil {
			return err
		}
		if _, err := e.c.Follow(ctx, op, nil); err != nil {
			return err
		}
		t0 := time.Now()
		op, err = e.c.StartSandbox(ctx, name)
		if err != nil {
			return err
		}
		if _, err := e.c.Follow(ctx, op, nil); err != nil {
			return err
		}
		if err := execTrue(ctx, e.c, name); err != nil {
			return err
		}
		byHand = append(byHand, time.Since(t0))
	}
	report("exec true on a sleeping sandbox (256 MiB): wake and answer", wake, "cairn start of its saved session, then exec true", byHand)
	report("exec true on it awake", awake, "exec true on a sleeping one", wake)
	wp, _ := percentiles(wake)
	goal(wp <= 300*time.Millisecond, "wake until the first exec answers: %s at p50 (goal ≤ 300 ms)", round(wp))
	return nil
}
