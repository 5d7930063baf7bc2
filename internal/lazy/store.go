package lazy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// store is the lazyfs process's view of the fill: which slots are in
// their files, which of those durably, and who waits for which. It alone
// writes fill data into the tree.
type store struct {
	plan    *Plan
	mountFd int      // the backing tree's root, for open_by_handle_at
	present *os.File // the present file
	byIno   map[uint64]int
	fileMu  []sync.Mutex // serialises the writes into one file

	mu      sync.Mutex
	written []bool // the data is in its file (maybe not on disk yet)
	durable []bool // and on disk, and marked in present
	missing []int  // per file: slots not written
	pending []int  // written, not yet durable
	waiters map[int][]chan error
	handles map[int]int   // per file: lazyHandles open on it
	left    int           // slots not durable
	needs   func(int)     // asks the filler for a slot; set by the socket's server
	done    chan struct{} // closed once every slot is durable

	commitMu sync.Mutex
}

// openStore reads the state directory dir of a tree laid out at backing.
func openStore(dir, backing string) (*store, error) {
	p, err := ReadPlan(dir)
	if err != nil {
		return nil, err
	}
	have, _, err := Present(dir, p)
	if err != nil {
		return nil, err
	}
	pf, err := os.OpenFile(filepath.Join(dir, presentFile), os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Open(backing, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		pf.Close()
		return nil, fmt.Errorf("the laid out tree: %w", err)
	}
	s := &store{
		plan: p, mountFd: fd, present: pf, byIno: map[uint64]int{},
		fileMu:  make([]sync.Mutex, len(p.Files)),
		written: have, durable: append([]bool(nil), have...),
		missing: make([]int, len(p.Files)), waiters: map[int][]chan error{}, handles: map[int]int{},
		needs: func(int) {}, done: make(chan struct{}),
	}
	for i, f := range p.Files {
		s.byIno[f.Ino] = i
	}
	for i, ok := range have {
		if !ok {
			s.missing[p.slots[i].file]++
			s.left++
		}
	}
	if s.left == 0 {
		close(s.done)
	}
	return s, nil
}

func (s *store) close() {
	unix.Close(s.mountFd)
	s.present.Close()
}

// fileOf returns the plan's file of backing inode ino while it still has
// slots not written.
func (s *store) fileOf(ino uint64) (int, bool) {
	i, ok := s.byIno[ino]
	if !ok {
		return 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return i, s.missing[i] > 0
}

// hold counts a lazyHandle opened on file i.
func (s *store) hold(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handles[i]++
}

// holdIfOpen counts one more lazyHandle on file i if one is open already,
// and reports whether it did.
func (s *store) holdIfOpen(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.handles[i] == 0 {
		return false
	}
	s.handles[i]++
	return true
}

// unhold counts a lazyHandle of file i closed.
func (s *store) unhold(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.handles[i]--; s.handles[i] <= 0 {
		delete(s.handles, i)
	}
}

// slotsIn returns file i's slots whose data lies in [off, off+n) of the
// file.
func (s *store) slotsIn(i int, off, n uint64) []int {
	f := &s.plan.Files[i]
	slots := s.plan.slots[f.First : f.First+len(f.Chunks)]
	end := off + n
	var out []int
	var stream uint64 // where extent x starts in the stream
	for _, x := range f.Extents {
		lo, hi := max(off, x.Offset), min(end, x.Offset+x.Length)
		if lo < hi {
			slo, shi := stream+(lo-x.Offset), stream+(hi-x.Offset)
			// The first chunk that ends after slo.
			k := sort.Search(len(slots), func(k int) bool {
				return slots[k].stream+uint64(f.Chunks[k].Length) > slo
			})
			for ; k < len(slots) && slots[k].stream < shi; k++ {
				if len(out) == 0 || out[len(out)-1] != f.First+k {
					out = append(out, f.First+k)
				}
			}
		}
		stream += x.Length
	}
	return out
}

// seat returns the extent and the offset in it of stream offset pos.
func seat(xs []Extent, pos uint64) (int, uint64) {
	for i, x := range xs {
		if pos < x.Length {
			return i, pos
		}
		pos -= x.Length
	}
	return len(xs), 0
}

// ErrUnavailable is why a read waited in vain: its data could not be
// fetched (the filler said so, or did not answer in time).
var ErrUnavailable = errors.New("the data could not be fetched")

// demandWait bounds how long a read waits for its data: long enough for
// cairnd to restart, short enough that a process is not stuck for good.
var demandWait = 2 * time.Minute

// wait returns once every slot of slots is written, or fails.
func (s *store) wait(ctx context.Context, slots []int) error {
	var chans []chan error
	s.mu.Lock()
	for _, sl := range slots {
		if s.written[sl] {
			continue
		}
		ch := make(chan error, 1)
		first := len(s.waiters[sl]) == 0
		s.waiters[sl] = append(s.waiters[sl], ch)
		chans = append(chans, ch)
		if first {
			s.needs(sl)
		}
	}
	s.mu.Unlock()
	t := time.NewTimer(demandWait)
	defer t.Stop()
	for _, ch := range chans {
		select {
		case err := <-ch:
			if err != nil {
				return err
			}
		case <-t.C:
			return fmt.Errorf("%w: no answer within %v", ErrUnavailable, demandWait)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// waiting returns the slots reads wait for (asked again of a new filler).
func (s *store) waiting() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int, 0, len(s.waiters))
	for sl := range s.waiters {
		out = append(out, sl)
	}
	return out
}

// fail wakes the reads waiting for slot sl with an error.
func (s *store) fail(sl int, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range s.waiters[sl] {
		ch <- fmt.Errorf("%w: %s", ErrUnavailable, reason)
	}
	delete(s.waiters, sl)
}

// put writes slot sl's chunk data into its file, unless it is there.
func (s *store) put(sl int, data []byte) error {
	if sl < 0 || sl >= len(s.plan.slots) {
		return fmt.Errorf("slot %d out of range", sl)
	}
	sd := s.plan.slots[sl]
	f := &s.plan.Files[sd.file]
	if len(data) != int(f.Chunks[sd.chunk].Length) {
		return fmt.Errorf("slot %d: %d bytes, the chunk has %d", sl, len(data), f.Chunks[sd.chunk].Length)
	}
	s.fileMu[sd.file].Lock()
	defer s.fileMu[sd.file].Unlock()
	s.mu.Lock()
	if s.written[sl] {
		s.mu.Unlock()
		return nil
	}
	last := s.missing[sd.file] == 1
	s.mu.Unlock()
	if err := s.writeSlot(f, sd, data, last); err != nil {
		return err
	}
	s.mu.Lock()
	s.written[sl] = true
	s.missing[sd.file]--
	s.pending = append(s.pending, sl)
	for _, ch := range s.waiters[sl] {
		ch <- nil
	}
	delete(s.waiters, sl)
	s.mu.Unlock()
	return nil
}

// writeSlot writes data at the file's extents; the last slot of a file
// also sets its mtime back to the checkpoint's. A file gone meanwhile
// (deleted inside the sandbox) takes nothing and is no error.
func (s *store) writeSlot(f *File, sd slot, data []byte, last bool) error {
	fd, err := unix.OpenByHandleAt(s.mountFd, unix.NewFileHandle(f.HandleType, f.Handle), unix.O_WRONLY|unix.O_CLOEXEC)
	if errors.Is(err, unix.ESTALE) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", f.Path, err)
	}
	defer unix.Close(fd)
	p, pos := data, sd.stream
	for xi, xoff := seat(f.Extents, pos); len(p) > 0; xi, xoff = xi+1, 0 {
		if xi >= len(f.Extents) {
			return fmt.Errorf("%s: chunk past the file's extents", f.Path)
		}
		x := f.Extents[xi]
		n := min(uint64(len(p)), x.Length-xoff)
		if _, err := unix.Pwrite(fd, p[:n], int64(x.Offset+xoff)); err != nil {
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
		p = p[n:]
	}
	if last {
		t := unix.NsecToTimespec(f.Mtime)
		if err := unix.UtimesNanoAt(fd, "", []unix.Timespec{t, t}, unix.AT_EMPTY_PATH); err != nil {
			return fmt.Errorf("set the mtime of %s: %w", f.Path, err)
		}
	}
	return nil
}

// commit makes what was written durable: the tree's file system synced,
// then the slots marked in present, which is synced.
func (s *store) commit() error {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	s.mu.Lock()
	pend := s.pending
	s.pending = nil
	s.mu.Unlock()
	if len(pend) == 0 {
		return nil
	}
	err := unix.Syncfs(s.mountFd)
	if err == nil {
		for _, sl := range pend {
			if _, err = s.present.WriteAt([]byte{1}, int64(sl)); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = s.present.Sync()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.pending = append(s.pending, pend...)
		return fmt.Errorf("commit the fill: %w", err)
	}
	for _, sl := range pend {
		if !s.durable[sl] {
			s.durable[sl] = true
			s.left--
		}
	}
	if s.left == 0 {
		select {
		case <-s.done:
		default:
			close(s.done)
		}
	}
	return nil
}

// fillFile returns once every slot of file i is durable: before anything
// changes the file, a crash must not find a slot to fill again over it.
func (s *store) fillFile(ctx context.Context, i int) error {
	f := &s.plan.Files[i]
	all := make([]int, len(f.Chunks))
	for j := range all {
		all[j] = f.First + j
	}
	if err := s.wait(ctx, all); err != nil {
		return err
	}
	return s.commit()
}
