package lazy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/internal/repo/crypto"
)

// Source is where a Filler fetches chunks: the account's repository.
type Source interface {
	// LoadChunks returns the chunks ids, each authenticated and checked
	// against its id, or an error; it may return some of them with it.
	LoadChunks(ctx context.Context, ids []crypto.ID) (map[crypto.ID][]byte, error)
	// PackOf names the pack holding chunk id, to fetch a pack's chunks
	// together; an error when the repository cannot be opened now.
	PackOf(ctx context.Context, id crypto.ID) (string, bool, error)
}

// Note is what a Filler reports as it goes.
type Note struct {
	Kind  string // NoteProgress, NoteUnavailable, NoteAvailable or NoteComplete
	Done  int64  // bytes durably filled
	Total int64
	Err   error // for NoteUnavailable: why data cannot be fetched
	Files int   // for NotePrefetched: how many files
}

// Note kinds.
const (
	NoteProgress    = "progress"    // about every progressEvery
	NoteUnavailable = "unavailable" // a fetch failed: reads of missing data fail with EIO until it works again
	NoteAvailable   = "available"   // fetching works again after NoteUnavailable
	NoteComplete    = "complete"    // every chunk is in; the root needs no fill any more
	// NotePrefetched: the files the sandbox read first at its last boot
	// (Plan.Prefetch) are all in.
	NotePrefetched = "prefetched"
)

// progressEvery is how often a Filler reports its progress.
var progressEvery = 5 * time.Second

// Backoff bounds of a failing fill.
var (
	retryFirst = time.Second
	retryMax   = 30 * time.Second
)

// Filler fills one lazy root: it hands the lazyfs server of the state
// directory every chunk its reads wait for, at once, and the others in
// the background, a pack at a time, in manifest order.
type Filler struct {
	Dir    string
	Source Source
	Notify func(Note) // may be nil
	Log    *slog.Logger
	// RateLimit bounds the background fill, in bytes per second (what
	// reads wait for is never held back); 0: as fast as it goes.
	RateLimit int64
	// Begin, if not nil, holds the background fill back until it is
	// closed (the sandbox has started: its start's reads go first);
	// reads are served meanwhile.
	Begin <-chan struct{}
}

// fillRun is one connection's work.
type fillRun struct {
	f      *Filler
	plan   *Plan
	packs  [][]int // the slots of each pack (Filler.packs)
	packOf []int   // slot → its pack in packs
	// prefetched: NotePrefetched was sent (or there is nothing to
	// prefetch).
	prefetched bool
	mu         sync.Mutex // guards sent and w
	sent       []bool     // handed to lazyfs (durable or about to be)
	w          *bufio.Writer
	conn       net.Conn
	failed     bool // the last fetch failed (NoteUnavailable sent)
}

// Run fills until every chunk is durably in (it returns nil) or ctx
// ends. It keeps trying: a lazyfs not answering is dialled again, a
// repository not answering is asked again with backoff.
func (f *Filler) Run(ctx context.Context) error {
	if f.Log == nil {
		f.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	plan, err := ReadPlan(f.Dir)
	if err != nil {
		return err
	}
	packs, err := f.packs(ctx, plan)
	if err != nil {
		return err
	}
	run := &fillRun{f: f, plan: plan, packs: packs, packOf: make([]int, plan.Slots()), prefetched: plan.Prefetch == 0}
	for k, slots := range packs {
		for _, sl := range slots {
			run.packOf[sl] = k
		}
	}
	for {
		done, err := run.connectAndFill(ctx, packs)
		if done {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		f.Log.Warn("lazy fill: connection to lazyfs lost; dialling again", "dir", f.Dir, "err", err)
		if !sleep(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// packs groups the slots by pack, in the order of their first slot;
// it waits for the repository to answer.
func (f *Filler) packs(ctx context.Context, plan *Plan) ([][]int, error) {
	wait := retryFirst
	for {
		byPack := map[string]int{}
		var out [][]int
		var err error
		for i := range plan.slots {
			var name string
			var ok bool
			name, ok, err = f.Source.PackOf(ctx, plan.slots[i].id)
			if err != nil {
				break
			}
			if !ok {
				return nil, fmt.Errorf("lazy fill: chunk %s of %s is in no pack of the repository", plan.slots[i].id, plan.Files[plan.slots[i].file].Path)
			}
			k, seen := byPack[name]
			if !seen {
				k = len(out)
				byPack[name] = k
				out = append(out, nil)
			}
			out[k] = append(out[k], i)
		}
		if err == nil {
			return out, nil
		}
		f.note(Note{Kind: NoteUnavailable, Err: err})
		if !sleep(ctx, wait) {
			return nil, ctx.Err()
		}
		wait = min(2*wait, retryMax)
	}
}

func (f *Filler) note(n Note) {
	if f.Notify != nil {
		f.Notify(n)
	}
}

// connectAndFill dials lazyfs and fills over that connection; done once
// every slot is durable.
func (r *fillRun) connectAndFill(ctx context.Context, packs [][]int) (bool, error) {
	have, _, err := Present(r.f.Dir, r.plan)
	if err != nil {
		return false, err
	}
	if allTrue(have) {
		r.report(NoteComplete)
		return true, nil
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", filepath.Join(r.f.Dir, socketFile))
	if err != nil {
		return false, err
	}
	defer conn.Close()
	r.mu.Lock()
	r.sent, r.w, r.conn = have, bufio.NewWriterSize(conn, 1<<20), conn
	r.mu.Unlock()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	demand := newDemands()
	readErr := make(chan error, 1)
	go func() {
		rd := bufio.NewReader(conn)
		for {
			fr, err := readFrame(rd)
			if err != nil {
				readErr <- err
				cancel()
				return
			}
			if fr.kind == msgNeed && int(fr.slot) < r.plan.Slots() {
				demand.push(int(fr.slot))
			}
		}
	}()
	// Reads first: their own worker, never behind a background pack.
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			sl, ok := demand.pop(cctx)
			if !ok {
				return
			}
			r.fetch(cctx, []int{sl}, true)
		}
	})
	bgErr := r.background(cctx, packs)
	if bgErr == nil {
		// Everything is handed over: wait until lazyfs made it durable.
		for {
			r.notePrefetched()
			have, _, err := Present(r.f.Dir, r.plan)
			if err == nil && allTrue(have) {
				cancel()
				wg.Wait()
				r.report(NoteComplete)
				return true, nil
			}
			if !sleep(cctx, commitEvery) {
				break
			}
		}
	}
	cancel()
	wg.Wait()
	select {
	case err := <-readErr:
		return false, err
	default:
		return false, cctx.Err()
	}
}

// background hands over every slot not sent yet, a pack at a time, with
// backoff while fetching fails; nil once all are sent.
func (r *fillRun) background(ctx context.Context, packs [][]int) error {
	if r.f.Begin != nil {
		select {
		case <-r.f.Begin:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	last, start := time.Now(), time.Now()
	var moved int64
	wait := retryFirst
	for _, slots := range packs {
		for {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if r.fetch(ctx, slots, false) {
				wait = retryFirst
				break
			}
			if !sleep(ctx, wait) {
				return ctx.Err()
			}
			wait = min(2*wait, retryMax)
		}
		if lim := r.f.RateLimit; lim > 0 {
			for _, sl := range slots {
				moved += r.plan.SlotLength(sl)
			}
			due := start.Add(time.Duration(float64(moved) / float64(lim) * float64(time.Second)))
			if !sleep(ctx, time.Until(due)) {
				return ctx.Err()
			}
		}
		r.notePrefetched()
		if time.Since(last) >= progressEvery {
			last = time.Now()
			r.report(NoteProgress)
		}
	}
	return nil
}

// fetch fetches those of slots not sent and hands them to lazyfs; for a
// read (demand) that fails, lazyfs is told, so that the read fails with
// EIO. It reports whether all are sent.
func (r *fillRun) fetch(ctx context.Context, slots []int, demand bool) bool {
	r.mu.Lock()
	var ids []crypto.ID
	var want []int
	seen := map[crypto.ID]bool{}
	for _, sl := range slots {
		if r.sent[sl] {
			continue
		}
		want = append(want, sl)
		if id := r.plan.slots[sl].id; !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	r.mu.Unlock()
	if len(want) == 0 {
		return true
	}
	if demand {
		// The whole pack comes anyway: take its other chunks along.
		ids, want = r.packMates(want, ids)
	}
	got, err := r.f.Source.LoadChunks(ctx, ids)
	if ctx.Err() != nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, sl := range want {
		if r.sent[sl] {
			continue
		}
		data, ok := got[r.plan.slots[sl].id]
		if !ok {
			if demand {
				reason := "not fetched"
				if err != nil {
					reason = err.Error()
				}
				r.send(frame{kind: msgFail, slot: uint32(sl), payload: []byte(trim(reason, 512))})
			}
			continue
		}
		if r.send(frame{kind: msgPut, slot: uint32(sl), payload: data}) == nil {
			r.sent[sl] = true
		}
	}
	if err == nil {
		err = r.w.Flush()
	} else {
		r.w.Flush()
	}
	if err != nil && !r.failed {
		r.failed = true
		r.f.Log.Warn("lazy fill: fetching failed; reads of missing data fail with EIO until it works again", "dir", r.f.Dir, "err", err)
		r.reportLocked(Note{Kind: NoteUnavailable, Err: err})
	} else if err == nil && r.failed {
		r.failed = false
		r.reportLocked(Note{Kind: NoteAvailable})
	}
	return err == nil
}

// packMates adds to a read's slots the other unsent slots whose chunks
// are in the same packs: LoadChunks downloads a pack whole, so they come
// at no cost, and after the read's own slots (which lazyfs writes
// first). r.mu is not held.
func (r *fillRun) packMates(want []int, ids []crypto.ID) ([]crypto.ID, []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	inWant := make(map[int]bool, len(want))
	for _, sl := range want {
		inWant[sl] = true
	}
	seen := make(map[crypto.ID]bool, len(ids))
	for _, id := range ids {
		seen[id] = true
	}
	for _, sl := range want[:len(want):len(want)] {
		for _, mate := range r.packs[r.packOf[sl]] {
			if r.sent[mate] || inWant[mate] {
				continue
			}
			inWant[mate] = true
			want = append(want, mate)
			if id := r.plan.slots[mate].id; !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	return ids, want
}

// notePrefetched sends NotePrefetched once the prefetched files' slots
// are all durably in.
func (r *fillRun) notePrefetched() {
	if r.prefetched {
		return
	}
	have, done, err := Present(r.f.Dir, r.plan)
	if err != nil {
		return
	}
	last := r.plan.Files[r.plan.Prefetch-1]
	end := last.First + len(last.Chunks)
	for _, in := range have[:end] {
		if !in {
			return
		}
	}
	r.prefetched = true
	r.f.Log.Info("lazy fill: the files read first at the last boot are in", "dir", r.f.Dir, "files", r.plan.Prefetch)
	r.f.note(Note{Kind: NotePrefetched, Done: done, Total: r.plan.Bytes, Files: r.plan.Prefetch})
}

// send writes one frame; r.mu is held.
func (r *fillRun) send(fr frame) error { return writeFrame(r.w, fr) }

// report notes progress (or completion) read from the present file.
func (r *fillRun) report(kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reportLocked(Note{Kind: kind})
}

func (r *fillRun) reportLocked(n Note) {
	if _, done, err := Present(r.f.Dir, r.plan); err == nil {
		n.Done = done
	}
	n.Total = r.plan.Bytes
	r.f.note(n)
}

// Progress returns the bytes durably filled of those to fill for state
// directory dir.
func Progress(dir string) (done, total int64, err error) {
	p, err := ReadPlan(dir)
	if err != nil {
		return 0, 0, err
	}
	_, done, err = Present(dir, p)
	return done, p.Bytes, err
}

func allTrue(b []bool) bool {
	for _, v := range b {
		if !v {
			return false
		}
	}
	return true
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func trim(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// FormatBytes renders n in binary units: "512 B", "42.0 MiB".
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for v := n / unit; v >= unit; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// demands are the slots reads wait for, in the order lazyfs asked, each
// once: however many reads wait at once, none is dropped (lazyfs asks a
// slot once, when its first read comes). At most one entry per slot of
// the plan.
type demands struct {
	mu     sync.Mutex
	queue  []int
	queued map[int]bool
	signal chan struct{} // holds a token while the queue is not empty
}

func newDemands() *demands {
	return &demands{queued: map[int]bool{}, signal: make(chan struct{}, 1)}
}

// push adds slot sl unless it is queued already.
func (d *demands) push(sl int) {
	d.mu.Lock()
	if !d.queued[sl] {
		d.queued[sl] = true
		d.queue = append(d.queue, sl)
	}
	d.mu.Unlock()
	select {
	case d.signal <- struct{}{}:
	default:
	}
}

// pop returns the oldest slot asked for, waiting for one; false once ctx
// ends.
func (d *demands) pop(ctx context.Context) (int, bool) {
	for {
		d.mu.Lock()
		if len(d.queue) > 0 {
			sl := d.queue[0]
			d.queue = d.queue[1:]
			delete(d.queued, sl)
			more := len(d.queue) > 0
			d.mu.Unlock()
			if more {
				select {
				case d.signal <- struct{}{}:
				default:
				}
			}
			return sl, true
		}
		d.mu.Unlock()
		select {
		case <-d.signal:
		case <-ctx.Done():
			return 0, false
		}
	}
}
