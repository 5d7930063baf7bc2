package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"time"
)

// ceilingIters is how many times each write of the ceiling is timed.
const ceilingIters = 3

// benchWriteCeiling measures what this machine lets anyone write from
// memory into a new file, the way runsc writes a memory image (buffered,
// no fsync, 1 MiB writes of data that does not compress, one writer per
// core), after a sync so that no earlier write is still in flight: into a
// subvolume of the pool, where images go, and into tmpfs (/dev/shm), which
// has no disk and no file system work under it. The best of the first
// bounds the checkpoint rate of runsc and cairn alike.
func (e *env) benchWriteCeiling(ctx context.Context) error {
	fmt.Printf("write ceiling of this machine: %d writers, buffered 1 MiB writes of random bytes from memory into a new file, best of %d\n", runtime.NumCPU(), ceilingIters)
	buf := make([]byte, 2<<30)
	if _, err := rand.Read(buf); err != nil {
		return err
	}
	dir := e.tmp("ceiling")
	pool := e.d.poolDir()
	for _, size := range []int64{512 << 20, 2 << 30} {
		var inPool, inTmpfs []time.Duration
		for range ceilingIters {
			if err := e.floor.subvolume(ctx, dir); err != nil {
				return err
			}
			syscall.Sync()
			d, err := timedWrite(filepath.Join(dir, "pages.img"), buf[:size])
			if err == nil {
				err = reclaim(ctx, pool, dir)
			}
			if err != nil {
				return err
			}
			inPool = append(inPool, d)
			syscall.Sync()
			shm := filepath.Join("/dev/shm", fmt.Sprintf("cairn-bench-ceiling-%d", os.Getpid()))
			d, err = timedWrite(shm, buf[:size])
			os.Remove(shm)
			if err != nil {
				return err
			}
			inTmpfs = append(inTmpfs, d)
		}
		p, s := slices.Min(inPool), slices.Min(inTmpfs)
		fmt.Printf("  %s: into a pool subvolume %s (%s), into tmpfs %s (%s)\n",
			mib(size), round(p), rate(size, p), round(s), rate(size, s))
	}
	fmt.Println("  (neither runsc nor cairn writes an image faster than the first)")
	fmt.Println()
	return nil
}

// timedWrite writes data into a new file at path, in 1 MiB writes by one
// writer per core taking turns over the file, and returns how long the
// writes and the close took.
func timedWrite(path string, data []byte) (time.Duration, error) {
	const chunk = 1 << 20
	t0 := time.Now()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	writers := runtime.NumCPU()
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			for off := w * chunk; off < len(data); off += writers * chunk {
				if _, err := f.WriteAt(data[off:min(off+chunk, len(data))], int64(off)); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range writers {
		if werr := <-errs; werr != nil && err == nil {
			err = werr
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return time.Since(t0), err
}
