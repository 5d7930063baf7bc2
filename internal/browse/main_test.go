package browse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/testenv"
)

// These tests mount real FUSE file systems: they need root and /dev/fuse,
// and skip without them unless CI=true, where that is a failure.
//
// The test binary doubles as cairnd for the server's process: run with
// ServerCommand as its first argument it is the browse server, and with
// ensureChildEnv set it calls Ensure and then waits to be killed.

const ensureChildEnv = "BROWSE_TEST_ENSURE_CHILD"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ServerCommand {
		os.Exit(Main(os.Args[2:]))
	}
	if spec := os.Getenv(ensureChildEnv); spec != "" {
		os.Exit(ensureChild(spec))
	}
	os.Exit(m.Run())
}

// ensureChild is the process whose death the server must survive: it runs
// Ensure with the config in spec (mountpoint, tables, pool and log, each
// quoted as Go does), says "ready" and sleeps until killed.
func ensureChild(spec string) int {
	var c Config
	if _, err := fmt.Sscanf(spec, "%q %q %q %q", &c.Mountpoint, &c.Tables, &c.Pool, &c.Log); err != nil {
		fmt.Println("bad spec:", err)
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	c.Binary = exe
	if err := Ensure(context.Background(), c); err != nil {
		fmt.Println("ensure:", err)
		return 1
	}
	fmt.Println("ready")
	time.Sleep(time.Hour)
	return 0
}

func requireFUSE(t testing.TB) {
	t.Helper()
	testenv.Require(t)
	if _, err := os.Stat("/dev/fuse"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no /dev/fuse")
		}
		t.Skip("no /dev/fuse")
	}
}

// fixture is a pool directory, a tables directory and a mount point, all
// in one temporary directory.
type fixture struct {
	dir, pool, tables, mnt string
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	requireFUSE(t)
	dir := t.TempDir()
	f := &fixture{dir: dir, pool: filepath.Join(dir, "pool"), tables: filepath.Join(dir, "tables"), mnt: filepath.Join(dir, "browse")}
	for _, d := range []string{f.pool, f.tables, f.mnt, filepath.Join(f.pool, "checkpoints")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// checkpoint makes pool/checkpoints/<id> holding files (name → content;
// names may have directories).
func (f *fixture) checkpoint(t testing.TB, id string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(f.pool, "checkpoints", id)
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return "checkpoints/" + id
}

// serve mounts the view in this process until the test ends.
func (f *fixture) serve(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	w := &testWriter{t: t}
	log := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	go func() { done <- Serve(ctx, ServeConfig{Mountpoint: f.mnt, Tables: f.tables, Pool: f.pool, Log: log}) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if m, ok, _ := topMount(f.mnt); ok && m.fsType == "fuse."+fsType {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Serve: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the view is not mounted after 10 s")
		}
	}
	t.Cleanup(func() {
		cancel()
		err := <-done
		w.close()
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
		if _, ok, _ := topMount(f.mnt); ok {
			t.Errorf("%s still mounted after Serve returned", f.mnt)
		}
	})
}

// testWriter sends the server's log to the test's, until closed.
type testWriter struct {
	t      testing.TB
	mu     sync.Mutex
	closed bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Logf("%s", p)
	}
	return len(p), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

func publish(t testing.TB, tables, sb string, entries ...Entry) {
	t.Helper()
	if err := Publish(tables, sb, entries); err != nil {
		t.Fatal(err)
	}
}

// names lists dir in its own order, failing the test on an error.
func names(t testing.TB, dir string) []string {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatalf("list %s: %v", dir, err)
	}
	defer d.Close()
	out, err := d.Readdirnames(-1)
	if err != nil {
		t.Fatalf("list %s: %v", dir, err)
	}
	return out
}

func requireErrno(t testing.TB, what string, err error, want unix.Errno) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got %v, want %v", what, err, want)
	}
}
