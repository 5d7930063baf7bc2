package initd

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/cairn-sandbox/cairn/api"
)

// serveTarOut sends req.Path as a tar stream, as `tar -C DIR BASE` makes
// it: every entry's name starts with the base name of req.Path (none for
// "/"). Links are stored as links, hard links as such, owners as numbers
// with their names. It stays on the file system of req.Path, as tar
// --one-file-system does: a mount point below it (/proc, /.cairn) is an
// empty directory in the stream.
func (s *server) serveTarOut(st *yamux.Stream, req *api.FileRequest) error {
	top, err := os.Lstat(req.Path)
	if err != nil {
		return err
	}
	e := entryOf(req.Path, top, newNames())
	s.reply(st, api.FileReply{Entry: &e})
	fw := api.NewFileDataWriter(st)
	err = writeTar(fw, req.Path, top)
	if errors.Is(err, yamux.ErrStreamClosed) {
		return nil
	}
	_ = fw.End(endResult(err))
	return nil
}

// writeTar writes the tree at root (whose lstat is top) to w as a tar.
func writeTar(w io.Writer, root string, top fs.FileInfo) error {
	tw := tar.NewWriter(w)
	n := newNames()
	var dev uint64
	if st, ok := top.Sys().(*syscall.Stat_t); ok {
		dev = st.Dev
	}
	prefix := path.Base(root)
	if root == "/" {
		prefix = ""
	}
	type inode struct{ dev, ino uint64 }
	links := map[inode]string{}
	err := filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p != root {
				return nil // gone meanwhile
			}
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, root), "/")
		name := path.Join(prefix, rel)
		if name == "" || name == "." {
			return nil // the root "/" itself
		}
		fi, err := de.Info()
		if err != nil {
			return nil
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return nil // a socket: tar has no entry for it
		}
		hdr.Name = name
		hdr.Format = tar.FormatPAX
		hdr.AccessTime, hdr.ChangeTime = time.Time{}, time.Time{}
		st, _ := fi.Sys().(*syscall.Stat_t)
		if st != nil {
			hdr.Uid, hdr.Gid = int(st.Uid), int(st.Gid)
			hdr.Uname, hdr.Gname = n.user(st.Uid), n.group(st.Gid)
			hdr.Mode = int64(st.Mode & 0o7777)
		}
		if fi.IsDir() {
			hdr.Name += "/"
		}
		if fi.Mode().IsRegular() && st != nil && st.Nlink > 1 {
			key := inode{st.Dev, st.Ino}
			if first, ok := links[key]; ok {
				hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
			} else {
				links[key] = name
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			// Exactly hdr.Size bytes: a file that grew is cut, one that
			// shrank fails the stream rather than making a torn tar.
			_, err = io.Copy(tw, io.LimitReader(f, hdr.Size))
			f.Close()
			if err != nil {
				return err
			}
		}
		if fi.IsDir() && p != root && st != nil && st.Dev != dev {
			return fs.SkipDir // another file system mounted here
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// serveTarIn extracts the tar stream cairnd sends into the directory
// req.Path (with req.Parents made if missing), keeping the modes, owners
// (as numbers) and times of its entries. No entry may leave req.Path: a
// name with "..", or one reached through a link pointing out, is refused
// (os.Root).
func (s *server) serveTarIn(st *yamux.Stream, req *api.FileRequest) error {
	if req.Parents {
		uid, gid, _, err := owner(req.Owner)
		if err != nil {
			return err
		}
		if _, err := mkdirAll(req.Path, 0o755, uid, gid); err != nil {
			return err
		}
	}
	root, err := os.OpenRoot(req.Path)
	if err != nil {
		return err
	}
	defer root.Close()
	s.reply(st, api.FileReply{})
	data := api.NewFileDataReader(st)
	res, err := extractTar(root, data)
	if errors.Is(err, api.ErrFileDataCut) {
		return errStreamGone
	}
	if err != nil {
		return err // cairnd stops sending when it reads why
	}
	s.reply(st, api.FileReply{Tar: &res})
	return nil
}

// badTar is an error of code FileErrBadTar.
func badTar(format string, args ...any) error {
	return &opError{api.FileErrBadTar, "tar: " + fmt.Sprintf(format, args...)}
}

// tarName is the name an entry called name has under the root: cleaned,
// relative; "" for the root itself. A name leaving the root is an error.
func tarName(name string) (string, error) {
	if len(name) > api.MaxTarName || strings.IndexByte(name, 0) >= 0 {
		return "", badTar("entry name of %d bytes", len(name))
	}
	c := path.Clean(strings.TrimLeft(name, "/"))
	switch {
	case c == ".":
		return "", nil
	case c == ".." || strings.HasPrefix(c, "../"):
		return "", badTar("entry %q leaves the directory", name)
	}
	return c, nil
}

// extractTar extracts the tar r reads under root.
func extractTar(root *os.Root, r io.Reader) (api.TarResult, error) {
	var res api.TarResult
	tr := tar.NewReader(r)
	type dirTime struct {
		name string
		t    time.Time
	}
	var dirs []dirTime
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if errors.Is(err, api.ErrFileDataCut) {
				return res, err
			}
			return res, badTar("%v", err)
		}
		if res.Entries++; res.Entries > api.MaxTarEntries {
			return res, &opError{api.FileErrLimit, fmt.Sprintf("tar: more than %d entries", api.MaxTarEntries)}
		}
		name, err := tarName(hdr.Name)
		if err != nil {
			return res, err
		}
		if name == "" {
			continue // "./": the directory itself is there already
		}
		if dir := path.Dir(name); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return res, tarError(hdr.Name, err)
			}
		}
		mode := os.FileMode(hdr.Mode & 0o777)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return res, tarError(hdr.Name, err)
			}
			dirs = append(dirs, dirTime{name, hdr.ModTime})
		case tar.TypeReg, tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
			if hdr.Typeflag != tar.TypeReg {
				res.Entries-- // devices and FIFOs are not made
				continue
			}
			replace(root, name)
			f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return res, tarError(hdr.Name, err)
			}
			n, err := io.Copy(f, tr)
			res.Bytes += n
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				if errors.Is(err, api.ErrFileDataCut) {
					return res, err
				}
				return res, tarError(hdr.Name, err)
			}
		case tar.TypeSymlink:
			if len(hdr.Linkname) > api.MaxTarName {
				return res, badTar("link target of %d bytes", len(hdr.Linkname))
			}
			replace(root, name)
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return res, tarError(hdr.Name, err)
			}
			if err := root.Lchown(name, hdr.Uid, hdr.Gid); err != nil {
				return res, tarError(hdr.Name, err)
			}
			continue
		case tar.TypeLink:
			old, err := tarName(hdr.Linkname)
			if err != nil || old == "" {
				return res, badTar("hard link %q to %q", hdr.Name, hdr.Linkname)
			}
			replace(root, name)
			if err := root.Link(old, name); err != nil {
				return res, tarError(hdr.Name, err)
			}
			continue
		default:
			res.Entries-- // PAX globals and the like carry no file
			continue
		}
		if err := root.Lchown(name, hdr.Uid, hdr.Gid); err != nil {
			return res, tarError(hdr.Name, err)
		}
		// After the chown, which clears setuid and setgid.
		if err := root.Chmod(name, mode|specialBits(hdr.Mode)); err != nil {
			return res, tarError(hdr.Name, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			_ = root.Chtimes(name, hdr.ModTime, hdr.ModTime)
		}
	}
	// Directories' times last: what was made in them changed them.
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = root.Chtimes(dirs[i].name, dirs[i].t, dirs[i].t)
	}
	return res, nil
}

// specialBits are the setuid, setgid and sticky bits of a tar mode, as an
// os.FileMode.
func specialBits(m int64) os.FileMode {
	var fm os.FileMode
	if m&0o4000 != 0 {
		fm |= os.ModeSetuid
	}
	if m&0o2000 != 0 {
		fm |= os.ModeSetgid
	}
	if m&0o1000 != 0 {
		fm |= os.ModeSticky
	}
	return fm
}

// replace removes what is at name unless it is a directory, so that an
// entry takes its place.
func replace(root *os.Root, name string) {
	if fi, err := root.Lstat(name); err == nil && !fi.IsDir() {
		_ = root.Remove(name)
	}
}

// tarError is err, met extracting the entry called name.
func tarError(name string, err error) error {
	if strings.Contains(err.Error(), "path escapes from parent") {
		return badTar("entry %q leaves the directory", name)
	}
	return fmt.Errorf("tar entry %q: %w", name, err)
}
