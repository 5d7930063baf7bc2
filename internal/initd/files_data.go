package initd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"

	"github.com/hashicorp/yamux"

	"github.com/cairn-sandbox/cairn/api"
)

// endResult is the FrameFileEnd payload for err (nil: all sent).
func endResult(err error) *api.AgentResult {
	if err == nil {
		return nil
	}
	res := errorReply(err)
	res.Code = fileCode(err)
	return &res
}

// serveRead sends the content of the file at req.Path (its links
// followed, inside the sandbox).
func (s *server) serveRead(st *yamux.Stream, req *api.FileRequest) error {
	// O_NONBLOCK: a FIFO must not hang the open; it is refused below.
	f, err := os.OpenFile(req.Path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	switch {
	case fi.IsDir():
		return &opError{api.FileErrIsDir, fmt.Sprintf("read %s: is a directory", req.Path)}
	case !fi.Mode().IsRegular() && fi.Mode()&fs.ModeCharDevice == 0:
		return &opError{api.AgentErrInvalid, fmt.Sprintf("read %s: not a regular file", req.Path)}
	}
	e := entryOf(req.Path, fi, newNames())
	s.reply(st, api.FileReply{Entry: &e})
	fw := api.NewFileDataWriter(st)
	_, err = fw.ReadFrom(f)
	if errors.Is(err, yamux.ErrStreamClosed) {
		return nil
	}
	_ = fw.End(endResult(err))
	return nil
}

// serveWrite writes what cairnd sends to req.Path: into a new file beside
// it, renamed over it once every byte is there, so that a write cut short
// leaves the file as it was. A symbolic link is written through (its
// target, inside the sandbox, is replaced). An existing file keeps its
// mode and owner unless the request sets them.
func (s *server) serveWrite(st *yamux.Stream, req *api.FileRequest) error {
	uid, gid, hasOwner, err := owner(req.Owner)
	if err != nil {
		return err
	}
	target := req.Path
	if real, err := resolveLinks(target); err == nil {
		target = real
	}
	mode := uint32(0o644)
	fi, err := os.Stat(target)
	switch {
	case err == nil && fi.IsDir():
		return &opError{api.FileErrIsDir, fmt.Sprintf("write %s: is a directory", req.Path)}
	case err == nil:
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
			mode = sys.Mode & 0o7777
			if !hasOwner {
				uid, gid = int(sys.Uid), int(sys.Gid)
			}
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if req.Mode != nil {
		mode = *req.Mode
	}
	dir := path.Dir(target)
	if req.Parents {
		if _, err := mkdirAll(dir, 0o755, uid, gid); err != nil {
			return err
		}
	}
	tmp, err := os.CreateTemp(dir, "."+path.Base(target)+".cairn-*")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chown(uid, gid); err != nil {
		return err
	}
	if err := syscall.Fchmod(int(tmp.Fd()), mode); err != nil {
		return err
	}
	s.reply(st, api.FileReply{})
	if _, err := io.Copy(tmp, api.NewFileDataReader(st)); err != nil {
		if errors.Is(err, api.ErrFileDataCut) {
			return errStreamGone // cairnd gave up: the file stays as it was
		}
		s.replyFileError(st, err)
		return nil
	}
	if err := tmp.Close(); err != nil {
		s.replyFileError(st, err)
		return nil
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		s.replyFileError(st, err)
		return nil
	}
	done = true
	e, err := statEntry(target, newNames())
	if err != nil {
		s.replyFileError(st, err)
		return nil
	}
	e.Path, e.Name = req.Path, path.Base(req.Path)
	s.reply(st, api.FileReply{Entry: &e})
	return nil
}

// resolveLinks follows the symbolic links of p, the last one included,
// inside the sandbox; a link whose target does not exist yet resolves to
// that target.
func resolveLinks(p string) (string, error) {
	for range 40 {
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return "", err
			}
			return p, nil
		}
		t, err := os.Readlink(p)
		if err != nil {
			return "", err
		}
		if !path.IsAbs(t) {
			t = path.Join(path.Dir(p), t)
		}
		p = path.Clean(t)
	}
	return "", &fs.PathError{Op: "write", Path: p, Err: syscall.ELOOP}
}
