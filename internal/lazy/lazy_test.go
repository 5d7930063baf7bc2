package lazy

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/repo"
	"github.com/cairn-sandbox/cairn/internal/repo/crypto"
	"github.com/cairn-sandbox/cairn/internal/repo/manifest"
	"github.com/cairn-sandbox/cairn/internal/testenv"
)

// fakeSource serves chunks from memory, a pack per file, and fails while
// down is set; it counts the bytes it hands out.
type fakeSource struct {
	chunks  map[crypto.ID][]byte
	packs   map[crypto.ID]string
	down    atomic.Bool
	fetched atomic.Int64
}

func (s *fakeSource) LoadChunks(ctx context.Context, ids []crypto.ID) (map[crypto.ID][]byte, error) {
	if s.down.Load() {
		return nil, errors.New("both locations are down")
	}
	out := map[crypto.ID][]byte{}
	for _, id := range ids {
		out[id] = s.chunks[id]
		s.fetched.Add(int64(len(s.chunks[id])))
	}
	return out, nil
}

func (s *fakeSource) PackOf(ctx context.Context, id crypto.ID) (string, bool, error) {
	p, ok := s.packs[id]
	return p, ok, nil
}

// fixture is a laid out tree of files with holes and their plan.
type fixture struct {
	backing, state string
	want           map[string][]byte
	src            *fakeSource
}

func newFixture(t *testing.T, files map[string]int) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{backing: filepath.Join(dir, "tree"), state: filepath.Join(dir, "state"), want: map[string][]byte{},
		src: &fakeSource{chunks: map[crypto.ID][]byte{}, packs: map[crypto.ID]string{}}}
	if err := os.MkdirAll(f.backing, 0o755); err != nil {
		t.Fatal(err)
	}
	var laid []repo.LaidFile
	for name, size := range files {
		// A hole of 64 KiB, then size bytes of data, in chunks of 300 KiB.
		data := make([]byte, size)
		rand.Read(data)
		full := append(make([]byte, 64<<10), data...)
		f.want[name] = full
		p := filepath.Join(f.backing, name)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, int64(len(full))); err != nil {
			t.Fatal(err)
		}
		n := &manifest.Node{Path: name, Type: manifest.File, Size: uint64(len(full)), Mtime: 1_700_000_000_123_456_789,
			Extents: []manifest.Extent{{Offset: 64 << 10, Length: uint64(size)}}}
		for off := 0; off < size; off += 300 << 10 {
			c := data[off:min(off+300<<10, size)]
			var id crypto.ID
			rand.Read(id[:])
			f.src.chunks[id] = c
			f.src.packs[id] = fmt.Sprintf("pack-%s-%d", name, off/(1<<20))
			n.Chunks = append(n.Chunks, manifest.Chunk{ID: id, Length: uint32(len(c))})
		}
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, p, 0)
		if err != nil {
			t.Fatal(err)
		}
		laid = append(laid, repo.LaidFile{Node: n, Ino: st.Ino, Handle: h})
	}
	if err := WritePlan(f.state, NewPlan(1, "ck", "m", f.backing, laid)); err != nil {
		t.Fatal(err)
	}
	return f
}

// serve runs the lazyfs server in this process until the test ends.
func (f *fixture) serve(t *testing.T) string {
	t.Helper()
	testenv.Require(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ServeConfig{State: f.state, Backing: f.backing}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	mp := Mountpoint(f.state)
	for deadline := time.Now().Add(10 * time.Second); !isFuse(mp); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			select {
			case err := <-done:
				t.Fatalf("Serve: %v", err)
			default:
			}
			t.Fatal("lazyfs did not mount")
		}
	}
	return mp
}

// fill runs a Filler until the test ends; it returns a channel closed
// when Run returns nil.
func (f *fixture) fill(t *testing.T, rate int64) chan struct{} {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		if (&Filler{Dir: f.state, Source: f.src, RateLimit: rate}).Run(ctx) == nil {
			close(done)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return done
}

func TestReadsFetchWhatTheyNeedAndTheFillCompletes(t *testing.T) {
	f := newFixture(t, map[string]int{"big": 8 << 20, "small": 1000})
	mp := f.serve(t)
	// Slow background: the read must not wait for it.
	done := f.fill(t, 1<<20)
	b := make([]byte, 4096)
	fd, err := os.Open(filepath.Join(mp, "big"))
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	off := int64(64<<10 + 5<<20)
	if _, err := fd.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, f.want["big"][off:off+4096]) {
		t.Fatal("a read in the middle of a file being filled returned wrong bytes")
	}
	// The hole before the data is a hole of the checkpoint too.
	if _, err := fd.ReadAt(b, 0); err != nil || !bytes.Equal(b, make([]byte, 4096)) {
		t.Fatalf("the checkpoint's own hole: %v", err)
	}
	if got := f.src.fetched.Load(); got >= 8<<20 {
		t.Fatalf("the read waited for the whole file: %d bytes fetched", got)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(mp, "big"), &st); err != nil || st.Mtim.Nano() != 1_700_000_000_123_456_789 {
		t.Fatalf("mtime while filling: %v, %d", err, st.Mtim.Nano())
	}
	// A write fills the file first: nothing of the checkpoint is lost.
	w, err := os.OpenFile(filepath.Join(mp, "small"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte("XY"), 64<<10); err != nil {
		t.Fatal(err)
	}
	w.Close()
	f.want["small"][64<<10], f.want["small"][64<<10+1] = 'X', 'Y'
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the fill did not complete")
	}
	for name, want := range f.want {
		got, err := os.ReadFile(filepath.Join(mp, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s after the fill: %v, equal %v", name, err, bytes.Equal(got, want))
		}
		direct, err := os.ReadFile(filepath.Join(f.backing, name))
		if err != nil || !bytes.Equal(direct, want) {
			t.Fatalf("%s in the tree itself after the fill: %v", name, err)
		}
	}
	if err := unix.Stat(filepath.Join(f.backing, "big"), &st); err != nil || st.Mtim.Nano() != 1_700_000_000_123_456_789 {
		t.Fatalf("mtime after the fill: %v, %d", err, st.Mtim.Nano())
	}
	if d, total, err := Progress(f.state); err != nil || d != total {
		t.Fatalf("progress after the fill: %d of %d, %v", d, total, err)
	}
}

func TestUnfetchableDataFailsWithEIOAndTheFillResumes(t *testing.T) {
	f := newFixture(t, map[string]int{"a": 2 << 20, "b": 2 << 20})
	mp := f.serve(t)
	f.src.down.Store(true)
	done := f.fill(t, 0)
	b := make([]byte, 4096)
	fd, err := os.Open(filepath.Join(mp, "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	_, err = fd.ReadAt(b, 64<<10+100)
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("a read of data that cannot be fetched: %v, want EIO", err)
	}
	if _, err := fd.ReadAt(b, 0); err != nil {
		t.Fatalf("a read of the checkpoint's own hole while down: %v", err)
	}
	f.src.down.Store(false)
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the fill did not complete once the source answered")
	}
	got, err := os.ReadFile(filepath.Join(mp, "a"))
	if err != nil || !bytes.Equal(got, f.want["a"]) {
		t.Fatalf("a after the fill: %v", err)
	}
}

func TestTheFillResumesFromWhatIsDurable(t *testing.T) {
	f := newFixture(t, map[string]int{"a": 3 << 20})
	ctx, cancel := context.WithCancel(context.Background())
	testenv.Require(t)
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, ServeConfig{State: f.state, Backing: f.backing}) }()
	for deadline := time.Now().Add(10 * time.Second); !isFuse(Mountpoint(f.state)); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("lazyfs did not mount")
		}
	}
	fctx, fcancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { (&Filler{Dir: f.state, Source: f.src, RateLimit: 1 << 20}).Run(fctx) })
	for {
		d, _, err := Progress(f.state)
		if err != nil {
			t.Fatal(err)
		}
		if d > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	fcancel()
	wg.Wait()
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	before, _, _ := Progress(f.state)
	f.src.fetched.Store(0)
	mp := f.serve(t)
	<-f.fill(t, 0)
	if got := f.src.fetched.Load(); got > int64(len(f.want["a"]))-before {
		t.Errorf("fetched %d bytes again; %d were durable", got, before)
	}
	got, err := os.ReadFile(filepath.Join(mp, "a"))
	if err != nil || !bytes.Equal(got, f.want["a"]) {
		t.Fatalf("after the resumed fill: %v", err)
	}
}

func TestSlotsInFindsTheChunksOfARange(t *testing.T) {
	p := &Plan{Version: PlanVersion, Files: []File{{
		Extents: []Extent{{Offset: 100, Length: 50}, {Offset: 1000, Length: 70}},
		Chunks:  []Chunk{{ID: string(bytes.Repeat([]byte("a"), 64)), Length: 40}, {ID: string(bytes.Repeat([]byte("b"), 64)), Length: 40}, {ID: string(bytes.Repeat([]byte("c"), 64)), Length: 40}},
	}}, Bytes: 120}
	if err := p.index(); err != nil {
		t.Fatal(err)
	}
	s := &store{plan: p}
	for _, c := range []struct {
		off, n uint64
		want   []int
	}{
		{0, 100, nil},          // the hole before
		{100, 1, []int{0}},     // the first byte
		{139, 2, []int{0, 1}},  // across chunks in one extent
		{149, 851, []int{1}},   // the end of extent 1 and the hole after it
		{1000, 1, []int{1}},    // chunk 1 goes on in extent 2
		{1029, 2, []int{1, 2}}, // …to stream 80, then chunk 2
		{1030, 40, []int{2}},
		{1069, 100, []int{2}},
		{1070, 100, nil},
	} {
		got := s.slotsIn(0, c.off, c.n)
		if !equalInts(got, c.want) {
			t.Errorf("slotsIn(%d, %d) = %v, want %v", c.off, c.n, got, c.want)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The files a plan names first because the sandbox read them first are
// filled first, and the filler says when they are all in, before the
// rest; a read's chunk brings its pack-mates along.
func TestPrefetchedFilesComeFirstAndAreReported(t *testing.T) {
	f := newFixture(t, map[string]int{"bulk": 6 << 20, "app": 1 << 20})
	plan, err := ReadPlan(f.state)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Files[0].Path != "app" {
		plan.Files[0], plan.Files[1] = plan.Files[1], plan.Files[0]
	}
	plan.Prefetch = 1
	if err := os.RemoveAll(f.state); err != nil {
		t.Fatal(err)
	}
	if err := WritePlan(f.state, plan); err != nil {
		t.Fatal(err)
	}
	f.serve(t)
	var mu sync.Mutex
	var notes []Note
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- (&Filler{Dir: f.state, Source: f.src, RateLimit: 2 << 20, Notify: func(n Note) {
			mu.Lock()
			notes = append(notes, n)
			mu.Unlock()
		}}).Run(ctx)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the fill did not complete")
	}
	mu.Lock()
	defer mu.Unlock()
	pre, complete := -1, -1
	for i, n := range notes {
		switch n.Kind {
		case NotePrefetched:
			pre = i
			if n.Files != 1 || n.Done >= n.Total {
				t.Errorf("prefetched note %+v: want 1 file, and before the end", n)
			}
		case NoteComplete:
			complete = i
		}
	}
	if pre < 0 || complete < 0 || pre > complete {
		t.Fatalf("notes %+v: want the prefetched one before the complete one", notes)
	}
}

// However many reads wait at once, the filler drops none of their
// demands (lazyfs asks a slot once): 5000 slots asked while the worker
// is busy all come out, in order, each once, a slot asked twice while
// queued once.
func TestDemandsDropNone(t *testing.T) {
	d := newDemands()
	for sl := range 5000 {
		d.push(sl)
		if sl%10 == 0 {
			d.push(sl) // asked again while queued
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for want := range 5000 {
		got, ok := d.pop(ctx)
		if !ok || got != want {
			t.Fatalf("demand %d: got %d, %v", want, got, ok)
		}
	}
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if sl, ok := d.pop(short); ok {
		t.Fatalf("an empty queue gave slot %d", sl)
	}
	// A slot asked again once it was taken comes out again.
	d.push(7)
	if got, ok := d.pop(ctx); !ok || got != 7 {
		t.Fatalf("slot asked again: %d %v", got, ok)
	}
}
