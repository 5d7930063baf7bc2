package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// benchSkeleton measures the walking skeleton:
//   - create+start a busybox sandbox and run `true` in it (cairn: the API,
//     until `exec true` returns) against `runsc run` of the same kind of
//     bundle (a btrfs snapshot of the same image, process `true`);
//   - exec round trip of `true` in a running sandbox (cairn: client →
//     cairnd → cairn-init) against `runsc exec` into a running container.
func benchSkeleton(ctx context.Context, e *env) error {
	n, c := e.n, e.c
	fmt.Printf("== walking skeleton: %d iterations each (exec %d)\n\n", n, n*5)

	// 1. create+start+exec true.
	var cairnCreate []time.Duration
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("b%d", i)
		t0 := time.Now()
		if err := createSandbox(ctx, c, name); err != nil {
			return err
		}
		if err := execTrue(ctx, c, name); err != nil {
			return err
		}
		cairnCreate = append(cairnCreate, time.Since(t0))
		if err := deleteSandbox(ctx, c, name); err != nil {
			return err
		}
	}
	var bareRun []time.Duration
	for i := 0; i < n; i++ {
		dt, err := e.floor.runTrue(ctx, fmt.Sprintf("bare%d", i), filepath.Join(e.d.poolDir(), "tmp", fmt.Sprintf("bare%d", i)))
		if err != nil {
			return err
		}
		bareRun = append(bareRun, dt)
	}
	report("create+start busybox, run `true`", cairnCreate, "runsc run (same image, snapshot, `true`)", bareRun)

	// 2. exec round trip.
	var cairnExec []time.Duration
	for i := 0; i < n*5; i++ {
		t0 := time.Now()
		if err := execTrue(ctx, c, warmSandbox); err != nil {
			return err
		}
		cairnExec = append(cairnExec, time.Since(t0))
	}
	bareExec, err := e.floor.execTrue(ctx, "barex", filepath.Join(e.d.poolDir(), "tmp", "barex"), n*5)
	if err != nil {
		return err
	}
	report("exec `true` round trip", cairnExec, "runsc exec `true`", bareExec)
	return nil
}
