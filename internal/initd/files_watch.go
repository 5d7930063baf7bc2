package initd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/hashicorp/yamux"
	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/api"
)

// watchMask is what a watch asks inotify for.
const watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// pairWait is how long a move out of a directory (IN_MOVED_FROM) waits for
// its move in (IN_MOVED_TO) when it came last in a read.
const pairWait = 20 * time.Millisecond

// serveWatch sends the events of the directory req.Path (with
// req.Recursive, of its subdirectories too) as FileReply lines until
// cairnd closes the stream or the directory goes.
func (s *server) serveWatch(st *yamux.Stream, req *api.FileRequest) error {
	if n := s.watches.Add(1); n > api.MaxWatchStreams {
		s.watches.Add(-1)
		return &opError{api.FileErrWatches, fmt.Sprintf("watch: %d watch streams open already, at most %d", n-1, api.MaxWatchStreams)}
	}
	defer s.watches.Add(-1)
	w, err := newWatcher(req.Path, req.Recursive)
	if err != nil {
		return err
	}
	defer w.close()
	s.reply(st, api.FileReply{})
	go func() { // cairnd closing its side ends the watch
		io.Copy(io.Discard, st)
		w.close()
	}()
	err = w.run(func(ev api.FileEvent) error { return api.WriteMessage(st, api.FileReply{Event: &ev}) })
	if err != nil && !w.closed() {
		s.replyFileError(st, err)
	}
	return nil
}

// watcher turns the inotify events of a tree into FileEvents.
type watcher struct {
	f         *os.File // the inotify descriptor, non-blocking (the runtime's poller)
	fd        int
	top       string
	recursive bool
	dirs      map[int32]string // watch descriptor → directory
	wds       map[string]int32
	last      api.FileEvent // the last event sent, to merge writes
	done      chan struct{}
	closeOnce sync.Once
}

func newWatcher(top string, recursive bool) (*watcher, error) {
	fi, err := os.Stat(top)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, &opError{api.FileErrNotDir, fmt.Sprintf("watch %s: not a directory", top)}
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	w := &watcher{f: os.NewFile(uintptr(fd), "inotify"), fd: fd, top: top, recursive: recursive,
		dirs: map[int32]string{}, wds: map[string]int32{}, done: make(chan struct{})}
	if err := w.add(top); err != nil {
		w.close()
		return nil, err
	}
	if recursive {
		if err := w.addTree(top); err != nil {
			w.close()
			return nil, err
		}
	}
	return w, nil
}

// add watches the directory dir.
func (w *watcher) add(dir string) error {
	if len(w.dirs) >= api.MaxWatchDirs {
		return &opError{api.FileErrLimit, fmt.Sprintf("watch %s: more than %d directories", w.top, api.MaxWatchDirs)}
	}
	wd, err := unix.InotifyAddWatch(w.fd, dir, watchMask)
	if err != nil {
		return &fs.PathError{Op: "watch", Path: dir, Err: err}
	}
	w.dirs[int32(wd)] = dir
	w.wds[dir] = int32(wd)
	return nil
}

// addTree watches every directory below dir (not following links).
func (w *watcher) addTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil || p == dir || !de.IsDir() {
			return nil
		}
		if _, ok := w.wds[p]; ok {
			return nil
		}
		return w.add(p)
	})
}

func (w *watcher) close() {
	w.closeOnce.Do(func() {
		close(w.done)
		w.f.Close()
	})
}

func (w *watcher) closed() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// rawEvent is one inotify event, its name joined to its directory.
type rawEvent struct {
	wd     int32
	mask   uint32
	cookie uint32
	path   string
}

// run reads events and sends them, until the watcher is closed, the
// watched directory goes (an error of code not_found) or send fails.
func (w *watcher) run(send func(api.FileEvent) error) error {
	buf := make([]byte, 64<<10)
	var pending *rawEvent // an IN_MOVED_FROM waiting for its IN_MOVED_TO
	for {
		if pending != nil {
			_ = w.f.SetReadDeadline(time.Now().Add(pairWait))
		}
		n, err := w.f.Read(buf)
		_ = w.f.SetReadDeadline(time.Time{})
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if err := w.emit(send, w.moved(*pending, nil)); err != nil {
				return err
			}
			pending = nil
			continue
		}
		if err != nil {
			if w.closed() {
				return nil
			}
			return fmt.Errorf("read inotify: %w", err)
		}
		for _, ev := range w.parse(buf[:n]) {
			if ev.mask&unix.IN_Q_OVERFLOW != 0 {
				return &opError{api.FileErrLimit, "watch: the event queue overflowed; events were lost"}
			}
			if pending != nil {
				var to *rawEvent
				if ev.mask&unix.IN_MOVED_TO != 0 && ev.cookie == pending.cookie {
					to = &ev
				}
				if err := w.emit(send, w.moved(*pending, to)); err != nil {
					return err
				}
				pending = nil
				if to != nil {
					continue
				}
			}
			if ev.mask&unix.IN_MOVED_FROM != 0 {
				pending = &ev
				continue
			}
			if err := w.emit(send, w.event(ev)); err != nil {
				return err
			}
			if ev.mask&unix.IN_IGNORED != 0 {
				dir := w.dirs[ev.wd]
				delete(w.dirs, ev.wd)
				delete(w.wds, dir)
				if dir == w.top {
					return &opError{api.AgentErrNotFound, fmt.Sprintf("watch %s: the directory is gone", w.top)}
				}
			}
		}
	}
}

// parse splits what one read of the descriptor returned.
func (w *watcher) parse(b []byte) []rawEvent {
	var evs []rawEvent
	for len(b) >= unix.SizeofInotifyEvent {
		raw := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
		end := unix.SizeofInotifyEvent + int(raw.Len)
		if end > len(b) {
			break
		}
		name := strings.TrimRight(string(b[unix.SizeofInotifyEvent:end]), "\x00")
		p := w.dirs[raw.Wd]
		if name != "" {
			p = path.Join(p, name)
		}
		evs = append(evs, rawEvent{wd: raw.Wd, mask: raw.Mask, cookie: raw.Cookie, path: p})
		b = b[end:]
	}
	return evs
}

// event is what ev means, a zero Type when nothing to send.
func (w *watcher) event(ev rawEvent) []api.FileEvent {
	isDir := ev.mask&unix.IN_ISDIR != 0
	mk := func(t string) []api.FileEvent {
		return []api.FileEvent{{Type: t, Path: ev.path, Name: w.rel(ev.path), IsDir: isDir}}
	}
	switch {
	case ev.mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
		if isDir && w.recursive {
			if err := w.add(ev.path); err == nil {
				_ = w.addTree(ev.path)
			}
		}
		return mk(api.FileEventCreate)
	case ev.mask&unix.IN_MODIFY != 0:
		return mk(api.FileEventWrite)
	case ev.mask&unix.IN_DELETE != 0:
		return mk(api.FileEventRemove)
	case ev.mask&unix.IN_ATTRIB != 0 && ev.path != w.dirs[ev.wd]:
		return mk(api.FileEventChmod)
	}
	return nil // events of a watched directory itself: its parent's watch says them
}

// moved is the event of a move out of a directory (from) and, if it was
// seen, into one (to): a rename within the tree, else a remove.
func (w *watcher) moved(from rawEvent, to *rawEvent) []api.FileEvent {
	isDir := from.mask&unix.IN_ISDIR != 0
	if to == nil {
		if isDir {
			w.forget(from.path)
		}
		return []api.FileEvent{{Type: api.FileEventRemove, Path: from.path, Name: w.rel(from.path), IsDir: isDir}}
	}
	if isDir {
		w.move(from.path, to.path)
	}
	return []api.FileEvent{{Type: api.FileEventRename, Path: from.path, Name: w.rel(from.path), To: to.path, IsDir: isDir}}
}

// move renames the watched directories at or below from to below to.
func (w *watcher) move(from, to string) {
	for wd, dir := range w.dirs {
		if dir == from || strings.HasPrefix(dir, from+"/") {
			nd := to + strings.TrimPrefix(dir, from)
			delete(w.wds, dir)
			w.dirs[wd], w.wds[nd] = nd, wd
		}
	}
}

// forget stops watching the directories at or below dir (moved out).
func (w *watcher) forget(dir string) {
	for wd, d := range w.dirs {
		if d == dir || strings.HasPrefix(d, dir+"/") {
			_, _ = unix.InotifyRmWatch(w.fd, uint32(wd))
		}
	}
}

func (w *watcher) rel(p string) string {
	if w.top == "/" {
		return strings.TrimPrefix(p, "/")
	}
	return strings.TrimPrefix(strings.TrimPrefix(p, w.top), "/")
}

// emit sends evs, but a write to the file the last event sent was a write
// to.
func (w *watcher) emit(send func(api.FileEvent) error, evs []api.FileEvent) error {
	for _, ev := range evs {
		if ev.Type == api.FileEventWrite && w.last == ev {
			continue
		}
		w.last = ev
		if err := send(ev); err != nil {
			w.close()
			return nil
		}
	}
	return nil
}
