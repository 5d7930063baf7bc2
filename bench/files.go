package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
)

// filesSize is what each Files API measurement writes and reads.
const filesSize = 1 << 30

// blockReader yields n bytes: one random MiB over and over (random, so
// that nothing on the way compresses it; repeated, so that making it
// costs nothing).
type blockReader struct {
	block []byte
	n     int64
	off   int
}

func newBlockReader(n int64) *blockReader {
	b := make([]byte, 1<<20)
	rand.Read(b)
	return &blockReader{block: b, n: n}
}

func (r *blockReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	m := copy(p[:min(int64(len(p)), r.n)], r.block[r.off:])
	r.off = (r.off + m) % len(r.block)
	r.n -= int64(m)
	return m, nil
}

// benchFiles measures Files API write and read throughput of 1 GiB
// against the same through `cairn exec -i … cat` (the only way before the
// Files API) and against the host writing and reading a file of the same
// pool itself, in the same run. Nothing is synced in any of them: each
// ends when the bytes are in the file system (the page cache).
func benchFiles(ctx context.Context, e *env) error {
	c, sb := e.c, warmSandbox
	reps := min(e.n, 3)
	hostFile := filepath.Join(e.d.poolDir(), "tmp", "bench-files-host")
	if err := os.MkdirAll(filepath.Dir(hostFile), 0o700); err != nil {
		return err
	}
	defer os.Remove(hostFile)
	defer execSh(context.WithoutCancel(ctx), c, sb, "rm -f /bench-api /bench-exec /bench-inside")

	measure := func(fn func() error) ([]time.Duration, error) {
		var ds []time.Duration
		for range reps {
			t0 := time.Now()
			if err := fn(); err != nil {
				return nil, err
			}
			ds = append(ds, time.Since(t0))
		}
		return ds, nil
	}
	apiWrite, err := measure(func() error {
		_, err := c.WriteFile(ctx, sb, "/bench-api", newBlockReader(filesSize), client.WriteOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("files API write: %w", err)
	}
	execWrite, err := measure(func() error {
		return execCat(ctx, c, sb, []string{"sh", "-c", "cat > /bench-exec"}, newBlockReader(filesSize), io.Discard)
	})
	if err != nil {
		return fmt.Errorf("exec -i cat: %w", err)
	}
	hostWrite, err := measure(func() error {
		f, err := os.Create(hostFile)
		if err != nil {
			return err
		}
		_, err = io.CopyBuffer(f, newBlockReader(filesSize), make([]byte, api.FileChunk))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("host write: %w", err)
	}
	// What the sandbox itself writes in that time: the ceiling of any way
	// in through gVisor.
	insideWrite, err := measure(func() error {
		_, err := execSh(ctx, c, sb, "dd if=/dev/zero of=/bench-inside bs=1M count=1024 2>/dev/null")
		return err
	})
	if err != nil {
		return fmt.Errorf("inside write: %w", err)
	}
	throughput("Files API write of 1 GiB (PUT /files)", apiWrite, execWrite, hostWrite)
	fmt.Printf("  %-40s %8.0f MiB/s  (dd bs=1M of zeros by a process inside)\n\n", "inside the sandbox", rateOf(insideWrite))

	count := func(n int64, want int64) error {
		if n != want {
			return fmt.Errorf("read %d bytes, want %d", n, want)
		}
		return nil
	}
	apiRead, err := measure(func() error {
		rc, err := c.ReadFile(ctx, sb, "/bench-api")
		if err != nil {
			return err
		}
		defer rc.Close()
		n, err := io.CopyBuffer(io.Discard, rc, make([]byte, api.FileChunk))
		if err != nil {
			return err
		}
		return count(n, filesSize)
	})
	if err != nil {
		return fmt.Errorf("files API read: %w", err)
	}
	execRead, err := measure(func() error {
		cw := &countWriter{}
		if err := execCat(ctx, c, sb, []string{"cat", "/bench-exec"}, nil, cw); err != nil {
			return err
		}
		return count(cw.n, filesSize)
	})
	if err != nil {
		return fmt.Errorf("exec cat: %w", err)
	}
	hostRead, err := measure(func() error {
		f, err := os.Open(hostFile)
		if err != nil {
			return err
		}
		defer f.Close()
		n, err := io.CopyBuffer(io.Discard, f, make([]byte, api.FileChunk))
		if err != nil {
			return err
		}
		return count(n, filesSize)
	})
	if err != nil {
		return fmt.Errorf("host read: %w", err)
	}
	insideRead, err := measure(func() error {
		_, err := execSh(ctx, c, sb, "cat /bench-inside > /dev/null")
		return err
	})
	if err != nil {
		return fmt.Errorf("inside read: %w", err)
	}
	throughput("Files API read of 1 GiB (GET /files)", apiRead, execRead, hostRead)
	fmt.Printf("  %-40s %8.0f MiB/s  (cat of that file to /dev/null inside)\n\n", "inside the sandbox", rateOf(insideRead))
	return nil
}

type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// execCat runs cmd attached, stdin from in (none if nil), stdout to out.
func execCat(ctx context.Context, c *client.Client, name string, cmd []string, in io.Reader, out io.Writer) error {
	st, err := c.Exec(ctx, name, api.ExecRequest{Command: cmd, Stdin: in != nil}, client.ExecIO{Stdin: in, Stdout: out})
	if err != nil {
		return err
	}
	if st.Code != 0 {
		return fmt.Errorf("%v exited %d", cmd, st.Code)
	}
	return nil
}

// throughput prints the MiB/s (from the p50 time) of the Files API, of
// exec and of the host, the ratios, and the goal (≥ 0.5× the host's).
func throughput(what string, apiDs, execDs, hostDs []time.Duration) {
	a, x, h := rateOf(apiDs), rateOf(execDs), rateOf(hostDs)
	fmt.Println(what)
	fmt.Printf("  %-40s %8.0f MiB/s  (p50 of %d)\n", "Files API", a, len(apiDs))
	fmt.Printf("  %-40s %8.0f MiB/s\n", "cairn exec -i … cat", x)
	fmt.Printf("  %-40s %8.0f MiB/s\n", "the host, same pool", h)
	fmt.Printf("  ratio Files API / exec: %.2f×, Files API / host: %.2f×\n", a/x, a/h)
	goal(a >= 0.5*h, "Files API at %.2f× the host's own disk (goal ≥ 0.5×)", a/h)
}

// rateOf is the MiB/s of moving filesSize bytes in the p50 of ds.
func rateOf(ds []time.Duration) float64 {
	p50, _ := percentiles(ds)
	return float64(filesSize) / (1 << 20) / p50.Seconds()
}
