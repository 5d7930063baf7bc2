package lazy

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// fsType is the lazy root's file system: mountinfo lists it as
// "fuse.cairn-lazy"; Stop touches no mount of another type.
const fsType = "cairn-lazy"

// ServerCommand is the first argument that makes cairnd run as the
// lazyfs server of one lazy root (see Main).
const ServerCommand = "lazyfs"

// commitEvery is how often written fill data is made durable when no one
// waits for it.
const commitEvery = 200 * time.Millisecond

// ServeConfig says what one lazyfs server serves.
type ServeConfig struct {
	State   string // the state directory (plan.json, present, fill.sock)
	Backing string // the laid out tree (the root subvolume)
	Log     *slog.Logger
}

// Serve mounts the lazy root at State/root over Backing and serves it,
// and the fill socket, until the mount goes away (Stop) or ctx ends (then
// it unmounts).
func Serve(ctx context.Context, c ServeConfig) error {
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s, err := openStore(c.State, c.Backing)
	if err != nil {
		return fmt.Errorf("lazyfs: %w", err)
	}
	defer s.close()
	mp := filepath.Join(c.State, mountDir)
	if err := os.MkdirAll(mp, 0o755); err != nil {
		return fmt.Errorf("lazyfs: %w", err)
	}
	root, err := fs.NewLoopbackRoot(c.Backing)
	if err != nil {
		return fmt.Errorf("lazyfs: %w", err)
	}
	top := &node{LoopbackNode: root.(*fs.LoopbackNode), s: s, log: c.Log}
	sec := time.Second
	srv, err := fs.Mount(mp, top, &fs.Options{
		MountOptions: fuse.MountOptions{
			FsName: fsType, Name: fsType,
			// runsc's gofer may work under another uid; the kernel
			// checks modes and owners as on the tree itself.
			AllowOther: true, DirectMount: true,
			Options: []string{"default_permissions"},
			Logger:  log.New(io.Discard, "", 0),
		},
		// Everything that changes the tree comes through here, so the
		// kernel may cache what it was told.
		EntryTimeout: &sec, AttrTimeout: &sec,
		Logger: slog.NewLogLogger(c.Log.Handler(), slog.LevelWarn),
	})
	if err != nil {
		return fmt.Errorf("lazyfs: mount at %s: %w", mp, err)
	}
	c.Log.Info("lazyfs: serving", "mountpoint", mp, "backing", c.Backing, "pid", os.Getpid(), "left", s.left)
	if err := writeDurably(filepath.Join(c.State, pidFile), []byte(strconv.Itoa(os.Getpid()))); err != nil {
		srv.Unmount()
		return fmt.Errorf("lazyfs: %w", err)
	}
	sock := filepath.Join(c.State, socketFile)
	os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		srv.Unmount()
		return fmt.Errorf("lazyfs: fill socket: %w", err)
	}
	defer ln.Close()
	go serveFill(ln, s, c.Log)
	go func() {
		for range time.Tick(commitEvery) {
			if err := s.commit(); err != nil {
				c.Log.Error("lazyfs: commit", "err", err)
			}
		}
	}()
	done := make(chan struct{})
	go func() {
		srv.Wait()
		close(done)
	}()
	select {
	case <-done:
		c.Log.Info("lazyfs: the mount is gone; exiting", "mountpoint", mp)
	case <-ctx.Done():
		c.Log.Info("lazyfs: stopping: unmounting", "mountpoint", mp)
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("lazyfs: unmount %s: %w", mp, err)
		}
	}
	return s.commit()
}

// serveFill serves fill connections, one at a time: a new one replaces
// the last (a restarted cairnd).
func serveFill(ln net.Listener, s *store, l *slog.Logger) {
	var cur net.Conn
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if cur != nil {
			cur.Close()
		}
		cur = c
		go serveConn(c, s, l)
	}
}

// serveConn takes chunks from one filler and asks it for what reads wait
// for.
func serveConn(c net.Conn, s *store, l *slog.Logger) {
	defer c.Close()
	var wmu sync.Mutex
	w := bufio.NewWriter(c)
	ask := func(sl int) {
		go func() {
			wmu.Lock()
			defer wmu.Unlock()
			if writeFrame(w, frame{kind: msgNeed, slot: uint32(sl)}) == nil {
				w.Flush()
			}
		}()
	}
	s.mu.Lock()
	s.needs = ask
	s.mu.Unlock()
	for _, sl := range s.waiting() {
		ask(sl)
	}
	r := bufio.NewReaderSize(c, 1<<20)
	for {
		f, err := readFrame(r)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				l.Warn("lazyfs: fill connection", "err", err)
			}
			return
		}
		switch f.kind {
		case msgPut:
			if err := s.put(int(f.slot), f.payload); err != nil {
				l.Error("lazyfs: fill", "slot", f.slot, "err", err)
				s.fail(int(f.slot), err.Error())
				continue
			}
		case msgFail:
			if int(f.slot) < s.plan.Slots() {
				s.fail(int(f.slot), string(f.payload))
			}
		default:
			l.Warn("lazyfs: unknown fill message", "kind", f.kind)
			return
		}
	}
}

// Main runs the lazyfs server with the arguments after ServerCommand
// (--state DIR --backing DIR), logging to stderr; it returns the exit
// code. SIGTERM and SIGINT unmount the root and end it.
func Main(args []string) int {
	fl := flag.NewFlagSet(ServerCommand, flag.ContinueOnError)
	var c ServeConfig
	fl.StringVar(&c.State, "state", "", "the lazy root's state directory")
	fl.StringVar(&c.Backing, "backing", "", "the laid out tree to serve")
	if err := fl.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	if c.State == "" || c.Backing == "" || fl.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: cairnd lazyfs --state DIR --backing DIR")
		return 2
	}
	c.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := Serve(ctx, c); err != nil {
		c.Log.Error("lazyfs failed", "err", err)
		return 1
	}
	return 0
}
