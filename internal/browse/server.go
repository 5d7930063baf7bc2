package browse

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// fsType is the name of the view's file system: mountinfo lists it as
// "fuse.cairn-browse", and Ensure and Stop touch no mount of another type.
const fsType = "cairn-browse"

// ServerCommand is the first argument that makes cairnd run as the browse
// server (see Main).
const ServerCommand = "browse-server"

// ServeConfig says what the server serves.
type ServeConfig struct {
	Mountpoint string // where the view is mounted
	Tables     string // the directory of the tables (<sandbox id>.json)
	Pool       string // the pool's root; every entry's path is below it
	Log        *slog.Logger
}

// Serve mounts the view at c.Mountpoint and serves it until the mount goes
// away (unmounted, by Stop or by hand, and no longer used by any
// container), or until ctx ends, when it unmounts the view itself and
// returns at once, even if containers still hold it.
func Serve(ctx context.Context, c ServeConfig) error {
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	for _, p := range []*string{&c.Mountpoint, &c.Tables, &c.Pool} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	pool, err := os.OpenFile(c.Pool, os.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("browse: the pool: %w", err)
	}
	defer pool.Close()
	if _, err := os.Stat(c.Tables); err != nil {
		return fmt.Errorf("browse: the tables directory: %w", err)
	}
	fsys := &fileSystem{tables: c.Tables, pool: pool, log: c.Log, start: time.Now()}
	zero := time.Duration(0)
	srv, err := fs.Mount(c.Mountpoint, &rootNode{fsys: fsys}, &fs.Options{
		MountOptions: fuse.MountOptions{
			FsName: fsType, Name: fsType,
			// Read-only twice over (the superblock and the mount), no
			// devices or set-uid programs, and the kernel checks each
			// file's mode and owner as on the pool itself. Without
			// allow_other only root (the mounter) can enter it, which
			// runsc is.
			DirectMountStrict: true,
			DirectMountFlags:  unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV,
			Options:           []string{"ro", "default_permissions"},
			Logger:            log.New(io.Discard, "", 0),
		},
		// Nodes set their own timeouts; these zeros are the default for
		// the rest, the negative lookups among them.
		EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero,
		NullPermissions: true,
		Logger:          slog.NewLogLogger(c.Log.Handler(), slog.LevelWarn),
	})
	if err != nil {
		return fmt.Errorf("browse: mount at %s: %w", c.Mountpoint, err)
	}
	c.Log.Info("browse: serving", "mountpoint", c.Mountpoint, "tables", c.Tables, "pool", c.Pool, "pid", os.Getpid())
	done := make(chan struct{})
	go func() {
		srv.Wait()
		close(done)
	}()
	select {
	case <-done:
		c.Log.Info("browse: the mount is gone; exiting", "mountpoint", c.Mountpoint)
		return nil
	case <-ctx.Done():
		// Unmount only if the top mount there is still this server's:
		// after a Stop, another server may have mounted it since.
		if serverPid(c.Mountpoint) != os.Getpid() {
			c.Log.Info("browse: stopping", "mountpoint", c.Mountpoint)
			return nil
		}
		c.Log.Info("browse: stopping: unmounting", "mountpoint", c.Mountpoint)
		if err := unix.Unmount(c.Mountpoint, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("browse: unmount %s: %w", c.Mountpoint, err)
		}
		return nil
	}
}

// Main runs the browse server with command-line arguments args (those
// after ServerCommand): --mountpoint, --tables and --pool. It logs to
// stderr and returns the process's exit code. SIGTERM and SIGINT unmount
// the view and end it.
func Main(args []string) int {
	fl := flag.NewFlagSet(ServerCommand, flag.ContinueOnError)
	var c ServeConfig
	fl.StringVar(&c.Mountpoint, "mountpoint", "", "directory to mount the view at")
	fl.StringVar(&c.Tables, "tables", "", "directory of the tables, one <sandbox id>.json each")
	fl.StringVar(&c.Pool, "pool", "", "the pool's root directory")
	level := fl.String("log-level", "info", "debug, info, warn or error")
	if err := fl.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	if c.Mountpoint == "" || c.Tables == "" || c.Pool == "" || fl.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: cairnd browse-server --mountpoint DIR --tables DIR --pool DIR")
		return 2
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintln(os.Stderr, "browse-server: --log-level:", err)
		return 2
	}
	c.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := Serve(ctx, c); err != nil {
		c.Log.Error("browse server failed", "err", err)
		return 1
	}
	return 0
}
