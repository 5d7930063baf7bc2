package lazy

import (
	"context"
	"errors"
	"log/slog"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is a loopback node over the laid out tree that fills a file's
// data before anything reads or changes it.
type node struct {
	*fs.LoopbackNode
	s   *store
	log *slog.Logger
}

var (
	_ fs.NodeWrapChilder = (*node)(nil)
	_ fs.NodeOpener      = (*node)(nil)
	_ fs.NodeGetattrer   = (*node)(nil)
	_ fs.NodeSetattrer   = (*node)(nil)
)

// WrapChild makes every node of the tree a node.
func (n *node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), s: n.s, log: n.log}
}

// lazyFile returns the plan's file of n while some of its data is
// missing.
func (n *node) lazyFile() (int, bool) {
	if n.StableAttr().Mode&syscall.S_IFMT != syscall.S_IFREG {
		return 0, false
	}
	return n.s.fileOf(n.StableAttr().Ino)
}

// errno turns a failed fill into what the sandbox sees: EIO, never the
// hole's zeros.
func (n *node) errno(i int, err error) syscall.Errno {
	if errors.Is(err, context.Canceled) {
		return syscall.EINTR
	}
	n.log.Warn("lazyfs: data not available", "file", n.s.plan.Files[i].Path, "err", err)
	return syscall.EIO
}

// Open opens a file: one not wholly filled is filled first when opened
// for writing, and otherwise read through a handle that fills what each
// read needs. Other files are plain loopback files, which the kernel
// passes straight to the tree where it can (FUSE passthrough) — but not
// while a handle of the lazy kind is open on the same file: the kernel
// refuses to mix the two (EIO), so those open as handles too.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	i, lazy := n.lazyFile()
	if lazy && flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC) != 0 {
		if err := n.s.fillFile(ctx, i); err != nil {
			return nil, 0, n.errno(i, err)
		}
		lazy = false
	}
	planned := false
	if !lazy {
		i, planned = n.s.byIno[n.StableAttr().Ino]
		planned = planned && n.StableAttr().Mode&syscall.S_IFMT == syscall.S_IFREG
	}
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 || !lazy && (!planned || !n.s.holdIfOpen(i)) {
		return fh, fl, errno
	}
	lf, ok := fh.(*fs.LoopbackFile)
	if !ok {
		return fh, fl, errno
	}
	if lazy {
		n.s.hold(i)
	}
	return &lazyHandle{inner: lf, n: n, file: i}, fl, 0
}

// Getattr shows a file being filled with its checkpoint's mtime (the
// fill's writes change the tree's).
func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if lh, ok := f.(*lazyHandle); ok {
		f = lh.inner
	}
	if errno := n.LoopbackNode.Getattr(ctx, f, out); errno != 0 {
		return errno
	}
	if i, lazy := n.lazyFile(); lazy {
		mt := n.s.plan.Files[i].Mtime
		out.Mtime, out.Mtimensec = uint64(mt/1e9), uint32(mt%1e9)
	}
	return 0
}

// Setattr fills a file before its size, times, mode or owner change.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if i, lazy := n.lazyFile(); lazy {
		if err := n.s.fillFile(ctx, i); err != nil {
			return n.errno(i, err)
		}
	}
	if lh, ok := f.(*lazyHandle); ok {
		f = lh.inner
	}
	return n.LoopbackNode.Setattr(ctx, f, in, out)
}

// lazyHandle is an open file whose data may be missing (or was when a
// handle still open on it was opened). It has no PassthroughFd, so
// every read comes here; writes only once the file is whole.
type lazyHandle struct {
	inner *fs.LoopbackFile
	n     *node
	file  int
}

var (
	_ fs.FileReader    = (*lazyHandle)(nil)
	_ fs.FileWriter    = (*lazyHandle)(nil)
	_ fs.FileAllocater = (*lazyHandle)(nil)
	_ fs.FileGetattrer = (*lazyHandle)(nil)
	_ fs.FileReleaser  = (*lazyHandle)(nil)
	_ fs.FileFlusher   = (*lazyHandle)(nil)
	_ fs.FileFsyncer   = (*lazyHandle)(nil)
	_ fs.FileLseeker   = (*lazyHandle)(nil)
	_ fs.FileGetlker   = (*lazyHandle)(nil)
	_ fs.FileSetlker   = (*lazyHandle)(nil)
	_ fs.FileSetlkwer  = (*lazyHandle)(nil)
)

// Read waits for the chunks of the range read, then reads the tree.
func (h *lazyHandle) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if _, lazy := h.n.lazyFile(); lazy && off >= 0 && len(buf) > 0 {
		if err := h.n.s.wait(ctx, h.n.s.slotsIn(h.file, uint64(off), uint64(len(buf)))); err != nil {
			return nil, h.n.errno(h.file, err)
		}
	}
	return h.inner.Read(ctx, buf, off)
}

// Lseek fills the file first: SEEK_DATA and SEEK_HOLE must not see the
// holes of data still missing.
func (h *lazyHandle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	if err := h.n.s.fillFile(ctx, h.file); err != nil {
		return 0, h.n.errno(h.file, err)
	}
	return h.inner.Lseek(ctx, off, whence)
}

// Write writes to a whole file (a handle opened for writing is one).
func (h *lazyHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if _, lazy := h.n.lazyFile(); lazy {
		return 0, syscall.EBADF
	}
	return h.inner.Write(ctx, data, off)
}

// Allocate is fallocate on a whole file.
func (h *lazyHandle) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	if err := h.n.s.fillFile(ctx, h.file); err != nil {
		return h.n.errno(h.file, err)
	}
	return h.inner.Allocate(ctx, off, size, mode)
}

// Getattr is fstat.
func (h *lazyHandle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.n.Getattr(ctx, nil, out)
}

func (h *lazyHandle) Release(ctx context.Context) syscall.Errno {
	h.n.s.unhold(h.file)
	return h.inner.Release(ctx)
}
func (h *lazyHandle) Flush(ctx context.Context) syscall.Errno { return h.inner.Flush(ctx) }
func (h *lazyHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return h.inner.Fsync(ctx, flags)
}
func (h *lazyHandle) Getlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) syscall.Errno {
	return h.inner.Getlk(ctx, owner, lk, flags, out)
}
func (h *lazyHandle) Setlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return h.inner.Setlk(ctx, owner, lk, flags)
}
func (h *lazyHandle) Setlkw(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return h.inner.Setlkw(ctx, owner, lk, flags)
}
