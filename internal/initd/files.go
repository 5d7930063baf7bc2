package initd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path"
	"slices"
	"strconv"
	"syscall"

	"github.com/hashicorp/yamux"

	"github.com/cairn-sandbox/cairn/api"
)

// The files op (api.AgentOpFiles): cairn-init works on the sandbox's files
// itself, so that every path is resolved as the sandbox sees it, in its own
// mount namespace: a symbolic link to /etc/shadow is the sandbox's
// /etc/shadow, and "/.." is "/". cairnd never opens a path in a sandbox's
// root. cairn-init runs as root, so permissions do not stand in the way.

// serveFiles serves one files op.
func (s *server) serveFiles(st *yamux.Stream, req *api.FileRequest) {
	var err error
	switch req.Op {
	case api.FileOpStat:
		var e api.FileEntry
		if e, err = statEntry(req.Path, newNames()); err == nil {
			s.reply(st, api.FileReply{Entry: &e})
		}
	case api.FileOpList:
		err = s.serveList(st, req)
	case api.FileOpMkdir:
		var e api.FileEntry
		var created bool
		if e, created, err = makeDir(req); err == nil {
			s.reply(st, api.FileReply{Entry: &e, Created: created})
		}
	case api.FileOpRemove:
		if err = removePath(req); err == nil {
			s.reply(st, api.FileReply{})
		}
	case api.FileOpRename:
		var e api.FileEntry
		if err = os.Rename(req.Path, req.To); err == nil {
			if e, err = statEntry(req.To, newNames()); err == nil {
				s.reply(st, api.FileReply{Entry: &e})
			}
		}
	case api.FileOpRead:
		err = s.serveRead(st, req)
	case api.FileOpWrite:
		err = s.serveWrite(st, req)
	case api.FileOpTarOut:
		err = s.serveTarOut(st, req)
	case api.FileOpTarIn:
		err = s.serveTarIn(st, req)
	case api.FileOpWatch:
		err = s.serveWatch(st, req)
	default:
		err = &opError{api.AgentErrInvalid, fmt.Sprintf("files: unknown op %q", req.Op)}
	}
	if err != nil && !errors.Is(err, errStreamGone) {
		s.replyFileError(st, err)
	}
}

// replyFileError answers that a files op failed, with the code of its
// error (fileCode).
func (s *server) replyFileError(st *yamux.Stream, err error) {
	res := errorReply(err)
	s.reply(st, api.FileReply{Error: res.Error, Code: fileCode(err)})
}

// checkFileRequest checks a files request's paths and bounds, and cleans
// its paths.
func checkFileRequest(req *api.FileRequest) error {
	bad := func(format string, args ...any) error {
		return &opError{api.AgentErrInvalid, "files: " + fmt.Sprintf(format, args...)}
	}
	p, err := api.CheckPath(req.Path)
	if err != nil {
		return bad("%v", err)
	}
	req.Path = p
	switch req.Op {
	case api.FileOpRename:
		if req.To, err = api.CheckPath(req.To); err != nil {
			return bad("rename to: %v", err)
		}
		if req.Path == "/" || req.To == "/" {
			return bad("cannot rename /")
		}
	case api.FileOpRemove:
		if req.Path == "/" {
			return bad("cannot remove /")
		}
	case api.FileOpList:
		if req.Depth < 0 || req.Depth > api.MaxListDepth {
			return bad("depth %d, want 1 to %d", req.Depth, api.MaxListDepth)
		}
	case api.FileOpWrite, api.FileOpMkdir:
		if req.Path == "/" {
			return bad("%s of /", req.Op)
		}
	case api.FileOpStat, api.FileOpRead, api.FileOpTarOut, api.FileOpTarIn, api.FileOpWatch:
	default:
		return bad("unknown op %q", req.Op)
	}
	if req.Mode != nil && *req.Mode&^0o7777 != 0 {
		return bad("mode %#o has bits beyond 07777", *req.Mode)
	}
	return nil
}

// fileCode is the FileReply code of a failed op's error.
func fileCode(err error) string {
	if oe, ok := errors.AsType[*opError](err); ok {
		return oe.code
	}
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		if errors.Is(err, fs.ErrNotExist) {
			return api.AgentErrNotFound
		}
		return api.FileErrIO
	}
	switch errno {
	case syscall.ENOENT:
		return api.AgentErrNotFound
	case syscall.EEXIST:
		return api.FileErrExists
	case syscall.ENOTDIR:
		return api.FileErrNotDir
	case syscall.EISDIR:
		return api.FileErrIsDir
	case syscall.ENOTEMPTY:
		return api.FileErrNotEmpty
	case syscall.EACCES, syscall.EPERM, syscall.EROFS, syscall.ETXTBSY, syscall.EBUSY, syscall.EXDEV:
		return api.FileErrPermission
	case syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG:
		return api.FileErrNoSpace
	case syscall.ENAMETOOLONG, syscall.EINVAL, syscall.ELOOP:
		return api.AgentErrInvalid
	}
	return api.FileErrIO
}

// names caches the user and group names of ids for one request.
type names struct {
	users, groups map[uint32]string
}

func newNames() *names { return &names{users: map[uint32]string{}, groups: map[uint32]string{}} }

func (n *names) user(id uint32) string {
	if s, ok := n.users[id]; ok {
		return s
	}
	s := ""
	if u, err := user.LookupId(strconv.FormatUint(uint64(id), 10)); err == nil {
		s = u.Username
	}
	n.users[id] = s
	return s
}

func (n *names) group(id uint32) string {
	if s, ok := n.groups[id]; ok {
		return s
	}
	s := ""
	if g, err := user.LookupGroupId(strconv.FormatUint(uint64(id), 10)); err == nil {
		s = g.Name
	}
	n.groups[id] = s
	return s
}

// statEntry is the entry of p, as lstat sees it.
func statEntry(p string, n *names) (api.FileEntry, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return api.FileEntry{}, err
	}
	return entryOf(p, fi, n), nil
}

// entryOf is the entry of the file at p whose (l)stat is fi.
func entryOf(p string, fi fs.FileInfo, n *names) api.FileEntry {
	e := api.FileEntry{Name: path.Base(p), Path: p, Size: fi.Size(), ModTime: fi.ModTime().UTC()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Mode = st.Mode & 0o7777
		e.UID, e.GID = st.Uid, st.Gid
		e.Owner, e.Group = n.user(st.Uid), n.group(st.Gid)
	} else {
		e.Mode = uint32(fi.Mode().Perm())
	}
	switch m := fi.Mode(); {
	case m.IsRegular():
		e.Type = api.FileTypeFile
	case m.IsDir():
		e.Type = api.FileTypeDir
	case m&fs.ModeSymlink != 0:
		e.Type = api.FileTypeSymlink
		e.SymlinkTarget, _ = os.Readlink(p)
	default:
		e.Type = api.FileTypeOther
	}
	e.Permissions = permissions(fi.Mode(), e.Mode)
	return e
}

// permissions renders a mode as ls -l does: drwxr-sr-t.
func permissions(m fs.FileMode, bits uint32) string {
	b := []byte("----------")
	switch {
	case m.IsDir():
		b[0] = 'd'
	case m&fs.ModeSymlink != 0:
		b[0] = 'l'
	case m&fs.ModeNamedPipe != 0:
		b[0] = 'p'
	case m&fs.ModeSocket != 0:
		b[0] = 's'
	case m&fs.ModeCharDevice != 0:
		b[0] = 'c'
	case m&fs.ModeDevice != 0:
		b[0] = 'b'
	}
	for i, c := range "rwxrwxrwx" {
		if bits&(1<<(8-i)) != 0 {
			b[1+i] = byte(c)
		}
	}
	special := func(i int, set bool, lower, upper byte) {
		if !set {
			return
		}
		if b[i] == 'x' {
			b[i] = lower
		} else {
			b[i] = upper
		}
	}
	special(3, bits&0o4000 != 0, 's', 'S')
	special(6, bits&0o2000 != 0, 's', 'S')
	special(9, bits&0o1000 != 0, 't', 'T')
	return string(b)
}

// serveList answers the entries under req.Path, req.Depth levels deep,
// each directory's by name, a directory's entries right after it.
func (s *server) serveList(st *yamux.Stream, req *api.FileRequest) error {
	fi, err := os.Stat(req.Path)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return &opError{api.FileErrNotDir, fmt.Sprintf("list %s: not a directory", req.Path)}
	}
	s.reply(st, api.FileReply{})
	n, count := newNames(), 0
	var walk func(dir string, level int) error
	walk = func(dir string, level int) error {
		des, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, de := range des {
			p := path.Join(dir, de.Name())
			fi, err := de.Info()
			if err != nil {
				continue // gone meanwhile
			}
			if count++; count > api.MaxListEntries {
				return &opError{api.FileErrLimit, fmt.Sprintf("list %s: more than %d entries; list less deep", req.Path, api.MaxListEntries)}
			}
			e := entryOf(p, fi, n)
			if err := api.WriteMessage(st, api.FileReply{Entry: &e}); err != nil {
				return errStreamGone
			}
			if de.IsDir() && level < max(req.Depth, 1) {
				if err := walk(p, level+1); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
			}
		}
		return nil
	}
	switch err := walk(req.Path, 1); {
	case errors.Is(err, errStreamGone):
	case err != nil:
		s.replyFileError(st, err)
	default:
		s.reply(st, api.FileReply{Done: true})
	}
	return nil
}

// errStreamGone: cairnd closed the stream; nobody is left to answer.
var errStreamGone = errors.New("stream closed by cairnd")

// owner resolves req.Owner: ok false when it is "".
func owner(spec string) (uid, gid int, ok bool, err error) {
	if spec == "" {
		return 0, 0, false, nil
	}
	id, err := lookupUser(spec)
	if err != nil {
		return 0, 0, false, &opError{api.AgentErrInvalid, fmt.Sprintf("owner %q: %v", spec, err)}
	}
	return int(id.cred.Uid), int(id.cred.Gid), true, nil
}

// makeDir makes req.Path (with req.Parents its missing parents too, and an
// existing directory is no error). It reports whether it made req.Path.
func makeDir(req *api.FileRequest) (api.FileEntry, bool, error) {
	uid, gid, _, err := owner(req.Owner)
	if err != nil {
		return api.FileEntry{}, false, err
	}
	mode := uint32(0o755)
	if req.Mode != nil {
		mode = *req.Mode
	}
	var created bool
	if req.Parents {
		created, err = mkdirAll(req.Path, mode, uid, gid)
	} else {
		if err = os.Mkdir(req.Path, 0o700); err == nil {
			created = true
			err = setOwnerMode(req.Path, uid, gid, mode)
		}
	}
	if err != nil {
		return api.FileEntry{}, false, err
	}
	e, err := statEntry(req.Path, newNames())
	return e, created, err
}

// mkdirAll makes dir and its missing parents, each of mode and owned by
// uid:gid. It reports whether dir was made; an existing dir is no error,
// an existing file is (FileErrNotDir).
func mkdirAll(dir string, mode uint32, uid, gid int) (bool, error) {
	var missing []string
	for d := dir; ; d = path.Dir(d) {
		fi, err := os.Stat(d)
		if err == nil {
			if !fi.IsDir() {
				return false, &opError{api.FileErrNotDir, fmt.Sprintf("mkdir %s: %s is not a directory", dir, d)}
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return false, err
		}
		missing = append(missing, d)
		if d == "/" {
			break
		}
	}
	for _, d := range slices.Backward(missing) {
		if err := os.Mkdir(d, 0o700); err != nil {
			if errors.Is(err, fs.ErrExist) {
				continue // made meanwhile
			}
			return false, err
		}
		if err := setOwnerMode(d, uid, gid, mode); err != nil {
			return false, err
		}
	}
	return len(missing) > 0, nil
}

// setOwnerMode chowns then chmods p (in that order: chown clears setuid).
func setOwnerMode(p string, uid, gid int, mode uint32) error {
	if err := os.Lchown(p, uid, gid); err != nil {
		return err
	}
	return syscall.Chmod(p, mode)
}

// removePath removes req.Path, with req.Recursive what a directory holds.
// A path that does not exist is an error.
func removePath(req *api.FileRequest) error {
	if _, err := os.Lstat(req.Path); err != nil {
		return err
	}
	if req.Recursive {
		return os.RemoveAll(req.Path)
	}
	err := syscall.Unlink(req.Path)
	if errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.EPERM) {
		err = syscall.Rmdir(req.Path)
		if errors.Is(err, syscall.EEXIST) {
			err = syscall.ENOTEMPTY
		}
	}
	if err != nil {
		return &fs.PathError{Op: "remove", Path: req.Path, Err: err}
	}
	return nil
}
