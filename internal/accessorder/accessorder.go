// Package accessorder records in which order a sandbox reads its files
// after it starts, so that a lazy restore of one of its checkpoints can
// fetch those files first (docs/lazy-restore.md, "Prefetch in access
// order").
//
// The sandbox's processes run in gVisor, whose gofer and sentry open and
// read the files of its root on the host. One fanotify group watches the
// file system of the pool (FAN_MARK_FILESYSTEM, marked only while some
// recording runs): each event names the file read by a descriptor, whose
// device and inode say which sandbox root it belongs to (every btrfs
// subvolume has a device of its own). A recording keeps the inodes of its
// root in the order they were first read, and names them when it
// stops, by one walk of the root. What is recorded is files, not ranges:
// fanotify's notification events carry no offsets.
//
// The recorder only observes. A lost event (the queue overflowed, the file
// was gone before it was named) makes the order less complete, never
// wrong for what it holds, and nothing in a sandbox waits for it.
package accessorder

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Defaults for a recording: how long after the start, and at most how many
// files. A service is usually up within the window; the bound keeps a
// sandbox that reads its whole disk from making a record as long as its
// manifest.
const (
	DefaultWindow   = 60 * time.Second
	DefaultMaxFiles = 10000
)

// watchMask is what is watched: a file read. Not its open: a lazy root's
// filler opens every file to write it, and a file opened and never read
// is nothing to fetch first.
const watchMask = unix.FAN_ACCESS

// Watcher is one fanotify group over one file system.
type Watcher struct {
	path string // any directory of the watched file system
	self int    // our own pid: our reads (uploads, diffs) are not the sandbox's

	mu      sync.Mutex
	group   *os.File // the fanotify group; nil until the first recording
	marked  bool
	active  map[uint64]*Recording // by the device of the recording's root
	closed  bool
	readers sync.WaitGroup
}

// NewWatcher returns a watcher of the file system that holds path. It
// costs nothing until a recording starts.
func NewWatcher(path string) *Watcher {
	return &Watcher{path: path, self: os.Getpid(), active: map[uint64]*Recording{}}
}

// Recording is the order in which the files of one root were first read.
type Recording struct {
	w     *Watcher
	root  string
	dev   uint64
	max   int
	timer *time.Timer

	ended chan struct{} // closed by end

	mu       sync.Mutex
	seen     map[uint64]bool
	order    []uint64 // inodes, first read first
	overflow bool     // events were lost
	stopped  bool
}

// Record starts recording the first reads of the files under root, which
// must be the root of its own device (a btrfs subvolume), for window or
// until max files were read, whichever comes first (zero values: the
// defaults). Another recording of the same root ends first.
func (w *Watcher) Record(root string, window time.Duration, max int) (*Recording, error) {
	if window <= 0 {
		window = DefaultWindow
	}
	if max <= 0 {
		max = DefaultMaxFiles
	}
	var st unix.Stat_t
	if err := unix.Stat(root, &st); err != nil {
		return nil, fmt.Errorf("record reads of %s: %w", root, err)
	}
	r := &Recording{w: w, root: root, dev: st.Dev, max: max, seen: map[uint64]bool{}, ended: make(chan struct{})}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil, errors.New("record reads: the watcher is closed")
	}
	if err := w.markLocked(); err != nil {
		w.mu.Unlock()
		return nil, err
	}
	old := w.active[st.Dev]
	w.active[st.Dev] = r
	w.mu.Unlock()
	if old != nil {
		old.end()
	}
	r.timer = time.AfterFunc(window, r.end)
	return r, nil
}

// markLocked creates the group and marks the file system, once.
func (w *Watcher) markLocked() error {
	if w.group == nil {
		// Non-blocking, so that the file is read through Go's poller and
		// Close ends a read that waits.
		fd, err := unix.FanotifyInit(unix.FAN_CLASS_NOTIF|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK, unix.O_RDONLY|unix.O_LARGEFILE|unix.O_CLOEXEC)
		if err != nil {
			return fmt.Errorf("record reads: fanotify: %w", err)
		}
		w.group = os.NewFile(uintptr(fd), "fanotify")
		w.readers.Add(1)
		go w.read(w.group)
	}
	if !w.marked {
		if err := w.mark(unix.FAN_MARK_ADD); err != nil {
			return fmt.Errorf("record reads: watch %s: %w", w.path, err)
		}
		w.marked = true
	}
	return nil
}

// unmarkLocked stops the events while nothing records: every read of the
// pool would otherwise cost an event.
func (w *Watcher) unmarkLocked() {
	if !w.marked || len(w.active) > 0 || w.group == nil {
		return
	}
	if err := w.mark(unix.FAN_MARK_REMOVE); err != nil {
		slog.Warn("record reads: unwatch", "path", w.path, "err", err)
		return
	}
	w.marked = false
}

// mark adds or removes (op) the group's mark on the file system. The
// descriptor is borrowed through SyscallConn: File.Fd would make it
// blocking, and Close could then not end a read.
func (w *Watcher) mark(op uint) error {
	rc, err := w.group.SyscallConn()
	if err != nil {
		return err
	}
	var markErr error
	if err := rc.Control(func(fd uintptr) {
		markErr = unix.FanotifyMark(int(fd), op|unix.FAN_MARK_FILESYSTEM, watchMask, unix.AT_FDCWD, w.path)
	}); err != nil {
		return err
	}
	return markErr
}

// read takes the group's events until it is closed.
func (w *Watcher) read(group *os.File) {
	defer w.readers.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := group.Read(buf)
		if err != nil || n <= 0 {
			return // closed
		}
		for off := 0; off+int(unsafe.Sizeof(unix.FanotifyEventMetadata{})) <= n; {
			m := (*unix.FanotifyEventMetadata)(unsafe.Pointer(&buf[off]))
			if m.Event_len == 0 {
				break
			}
			w.event(m)
			off += int(m.Event_len)
		}
	}
}

// event files one event under the recording of its file's device, if any.
func (w *Watcher) event(m *unix.FanotifyEventMetadata) {
	if m.Mask&unix.FAN_Q_OVERFLOW != 0 {
		w.mu.Lock()
		for _, r := range w.active {
			r.mu.Lock()
			r.overflow = true
			r.mu.Unlock()
		}
		w.mu.Unlock()
	}
	if m.Fd < 0 {
		return
	}
	fd := int(m.Fd)
	defer unix.Close(fd)
	if int(m.Pid) == w.self {
		return
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return
	}
	w.mu.Lock()
	r := w.active[st.Dev]
	w.mu.Unlock()
	if r != nil {
		r.add(st.Ino)
	}
}

func (r *Recording) add(ino uint64) {
	r.mu.Lock()
	full := false
	if !r.stopped && !r.seen[ino] {
		r.seen[ino] = true
		r.order = append(r.order, ino)
		full = len(r.order) >= r.max
	}
	r.mu.Unlock()
	if full {
		r.end()
	}
}

// end stops taking events; what was recorded is kept for Stop.
func (r *Recording) end() {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.stopped = true
	r.mu.Unlock()
	close(r.ended)
	if r.timer != nil {
		r.timer.Stop()
	}
	w := r.w
	w.mu.Lock()
	if w.active[r.dev] == r {
		delete(w.active, r.dev)
	}
	w.unmarkLocked()
	w.mu.Unlock()
}

// Done reports whether the recording has ended: its window passed, it
// reached its bound, or it was stopped.
func (r *Recording) Done() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopped
}

// Ended is closed when the recording ends.
func (r *Recording) Ended() <-chan struct{} { return r.ended }

// Cancel ends the recording without naming what it saw (the boot it was
// for failed).
func (r *Recording) Cancel() { r.end() }

// Order is what a recording found: the files of the root, relative to it,
// in the order they were first read.
type Order struct {
	Files []string `json:"files"`
	// Partial: events were lost (the kernel's queue overflowed), so files
	// read then are missing.
	Partial bool `json:"partial,omitempty"`
}

// Stop ends the recording (if it has not ended) and names the files it
// saw, by one walk of the root: a file removed since is left out, one
// with several names is given the first found.
func (r *Recording) Stop() (Order, error) {
	r.end()
	r.mu.Lock()
	inodes := append([]uint64(nil), r.order...)
	partial := r.overflow
	r.mu.Unlock()
	names, err := nameInodes(r.root, r.dev, inodes)
	if err != nil {
		return Order{}, err
	}
	out := Order{Partial: partial}
	for _, ino := range inodes {
		if n, ok := names[ino]; ok {
			out.Files = append(out.Files, n)
		}
	}
	return out, nil
}

// nameInodes walks root (not into other devices) for the regular files
// whose inodes are wanted, stopping once each is named.
func nameInodes(root string, dev uint64, inodes []uint64) (map[uint64]string, error) {
	want := make(map[uint64]bool, len(inodes))
	for _, ino := range inodes {
		want[ino] = true
	}
	names := make(map[uint64]string, len(inodes))
	if len(want) == 0 {
		return names, nil
	}
	errFound := errors.New("all named")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a directory that went away or cannot be read
		}
		if !d.Type().IsRegular() && !d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if st.Dev != dev {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if want[st.Ino] {
			if _, named := names[st.Ino]; !named {
				rel, err := filepath.Rel(root, p)
				if err != nil {
					return nil
				}
				names[st.Ino] = rel
				if len(names) == len(want) {
					return errFound
				}
			}
		}
		return nil
	})
	if err != nil && err != errFound {
		return nil, err
	}
	return names, nil
}

// Close ends every recording and the group.
func (w *Watcher) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	active := make([]*Recording, 0, len(w.active))
	for _, r := range w.active {
		active = append(active, r)
	}
	w.mu.Unlock()
	for _, r := range active {
		r.end()
	}
	w.mu.Lock()
	group := w.group
	w.group = nil
	w.mu.Unlock()
	var err error
	if group != nil {
		err = group.Close()
		w.readers.Wait()
	}
	return err
}
