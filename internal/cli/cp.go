package cli

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
)

// cpOptions are the arguments of cairn cp.
type cpOptions struct {
	Src, Dst string
	Archive  bool
}

func newCpCommand(g *globalOptions) *cobra.Command {
	var opts cpOptions
	cmd := &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy files and directories in and out of a running sandbox",
		Long: `Copy a file or directory between the local machine and a running sandbox, or
between two sandboxes, as docker cp does. NAME:PATH names PATH in the sandbox
NAME (PATH absolute); anything else is a local path, "-" a tar stream on stdin
or stdout.

If DST is an existing directory, SRC is copied into it under its own name;
otherwise DST is created as the copy (its parent must exist). Modes, links and
times are kept. Into a sandbox, what is copied belongs to root unless -a keeps
the local owners; out of one, files belong to you, and setuid and setgid bits
are dropped, unless -a (as root) keeps them as the sandbox had them. Nothing
copied out leaves DST: entries with "..", or reached through a link they
made, are refused.`,
		Example: `  cairn cp ./site web:/srv/www          # into /srv/www/site, or as /srv/www
  cairn cp web:/var/log/app.log .         # ./app.log
  cairn cp web:/srv/data ./backup -a      # owners kept (as root)
  cairn cp web:/srv/data other:/srv/data  # sandbox to sandbox
  tar -C dir -c . | cairn cp - web:/srv/www`,
		Args: exactArgs("SRC", "DST"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Src, opts.Dst = args[0], args[1]
			return runCp(cmd.Context(), opts, g)
		},
	}
	cmd.Flags().BoolVarP(&opts.Archive, "archive", "a", false, "keep owners (and, copying out as root, setuid and setgid)")
	return cmd
}

var remoteRE = regexp.MustCompile(`^([a-z0-9][a-z0-9-]{0,62}):(.*)$`)

// cpEnd is one side of a copy.
type cpEnd struct {
	sandbox string // "" for a local path
	path    string
}

func parseCpEnd(s string) cpEnd {
	if m := remoteRE.FindStringSubmatch(s); m != nil {
		return cpEnd{sandbox: m[1], path: m[2]}
	}
	return cpEnd{path: s}
}

func runCp(ctx context.Context, opts cpOptions, g *globalOptions) error {
	src, dst := parseCpEnd(opts.Src), parseCpEnd(opts.Dst)
	for _, e := range []cpEnd{src, dst} {
		if e.sandbox != "" && !strings.HasPrefix(e.path, "/") {
			return usageErrorf("%s:%s: the path inside a sandbox must be absolute", e.sandbox, e.path)
		}
	}
	c := g.client()
	var res api.TarResult
	var err error
	switch {
	case src.sandbox == "" && dst.sandbox == "":
		return usageErrorf("cairn cp copies to or from a sandbox: name one as NAME:PATH")
	case src.sandbox != "":
		res, err = copyOut(ctx, c, src, dst, opts.Archive, g)
	default:
		res, err = copyIn(ctx, c, src, dst, opts.Archive, g)
	}
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(res)
	}
	if opts.Dst != "-" {
		g.eprintf("Copied %d entries (%s) to %s\n", res.Entries, formatSize(res.Bytes), opts.Dst)
	}
	return nil
}

// remoteTarget is where a copy into the sandbox of dst extracts, and the
// name its top entry takes there, as docker cp decides: into an existing
// directory under srcBase, else as dst itself.
func remoteTarget(ctx context.Context, c *client.Client, dst cpEnd, srcBase string, srcIsDir bool) (dir, top string, err error) {
	e, err := c.StatFile(ctx, dst.sandbox, dst.path)
	switch {
	case err == nil && e.Type == api.FileTypeDir:
		return dst.path, srcBase, nil
	case err == nil && srcIsDir:
		return "", "", usageErrorf("cannot copy a directory onto the file %s:%s", dst.sandbox, dst.path)
	case err == nil, client.CodeOf(err) == api.CodeNoFile:
		if dst.path == "/" {
			return "/", srcBase, nil
		}
		return path.Dir(dst.path), path.Base(dst.path), nil
	}
	return "", "", err
}

// copyIn copies the local src (or a tar on stdin) into the sandbox.
func copyIn(ctx context.Context, c *client.Client, src, dst cpEnd, archive bool, g *globalOptions) (api.TarResult, error) {
	if src.path == "-" {
		return c.ExtractTar(ctx, dst.sandbox, dst.path, g.stdin, client.WriteOptions{NoParents: true})
	}
	fi, err := os.Lstat(src.path)
	if err != nil {
		return api.TarResult{}, err
	}
	abs, err := filepath.Abs(src.path)
	if err != nil {
		return api.TarResult{}, err
	}
	dir, top, err := remoteTarget(ctx, c, dst, filepath.Base(abs), fi.IsDir())
	if err != nil {
		return api.TarResult{}, err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeLocalTar(pw, abs, top, archive)) }()
	res, err := c.ExtractTar(ctx, dst.sandbox, dir, pr, client.WriteOptions{NoParents: true})
	pr.CloseWithError(errors.New("copy ended"))
	return res, err
}

// writeLocalTar writes the local tree at root to w as a tar whose entries
// are named from top on; owners are root's unless archive.
func writeLocalTar(w io.Writer, root, top string, archive bool) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := de.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return nil // a socket: skipped
		}
		rel, _ := filepath.Rel(root, p)
		hdr.Name = path.Join(top, filepath.ToSlash(rel))
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Format = tar.FormatPAX
		hdr.Uname, hdr.Gname = "", ""
		if !archive {
			hdr.Uid, hdr.Gid = 0, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, io.LimitReader(f, hdr.Size))
			f.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// copyOut copies src out of its sandbox: to dst's sandbox, stdout or a
// local path.
func copyOut(ctx context.Context, c *client.Client, src, dst cpEnd, archive bool, g *globalOptions) (api.TarResult, error) {
	e, err := c.StatFile(ctx, src.sandbox, src.path)
	if err != nil {
		return api.TarResult{}, err
	}
	srcBase := path.Base(path.Clean(src.path))
	if path.Clean(src.path) == "/" {
		srcBase = ""
	}
	rc, err := c.Tar(ctx, src.sandbox, src.path)
	if err != nil {
		return api.TarResult{}, err
	}
	defer rc.Close()
	switch {
	case dst.sandbox != "":
		dir, top, err := remoteTarget(ctx, c, dst, srcBase, e.Type == api.FileTypeDir)
		if err != nil {
			return api.TarResult{}, err
		}
		body := io.Reader(rc)
		if top != srcBase {
			pr, pw := io.Pipe()
			go func() { pw.CloseWithError(renameTar(pw, rc, srcBase, top)) }()
			defer pr.Close()
			body = pr
		}
		return c.ExtractTar(ctx, dst.sandbox, dir, body, client.WriteOptions{NoParents: true})
	case dst.path == "-":
		n, err := io.Copy(g.stdout, rc)
		return api.TarResult{Bytes: n}, err
	}
	dir, top := dst.path, srcBase
	if fi, err := os.Stat(dst.path); err == nil && fi.IsDir() {
		if srcBase == "" {
			top = ""
		}
	} else if err == nil && e.Type == api.FileTypeDir {
		return api.TarResult{}, usageErrorf("cannot copy a directory onto the file %s", dst.path)
	} else if err == nil || errors.Is(err, fs.ErrNotExist) {
		dir, top = filepath.Dir(dst.path), filepath.Base(dst.path)
		if srcBase == "" { // all of / into a new directory
			if err := os.Mkdir(dst.path, 0o755); err != nil {
				return api.TarResult{}, err
			}
			dir, top = dst.path, ""
		}
	} else {
		return api.TarResult{}, err
	}
	return extractLocal(rc, dir, srcBase, top, archive)
}

// renameTar copies the tar r reads to w, its entries named from top
// instead of from.
func renameTar(w io.Writer, r io.Reader, from, top string) error {
	tr, tw := tar.NewReader(r), tar.NewWriter(w)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return tw.Close()
		}
		if err != nil {
			return err
		}
		hdr.Name = renamed(hdr.Name, from, top)
		if hdr.Typeflag == tar.TypeLink {
			hdr.Linkname = renamed(hdr.Linkname, from, top)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
}

// renamed is name with its first element from replaced by top (from ""
// puts every name under top).
func renamed(name, from, top string) string {
	name = strings.TrimPrefix(name, "/")
	if from == "" {
		return path.Join(top, name)
	}
	if name == from || strings.HasPrefix(name, from+"/") {
		return top + strings.TrimPrefix(name, from)
	}
	return name
}

// extractLocal extracts the tar r reads (a sandbox's: untrusted) under
// the local directory dir, its entries renamed from from to top. Nothing
// leaves dir: os.Root refuses a name or a link that climbs out.
func extractLocal(r io.Reader, dir, from, top string, archive bool) (api.TarResult, error) {
	var res api.TarResult
	root, err := os.OpenRoot(dir)
	if err != nil {
		return res, err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	asRoot := os.Geteuid() == 0
	type dirMode struct {
		name string
		perm os.FileMode
		hdr  *tar.Header
	}
	var dirs []dirMode // set last: a read-only directory must first be filled
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			for i := len(dirs) - 1; i >= 0; i-- {
				d := dirs[i]
				if err := root.Chmod(d.name, d.perm); err != nil {
					return res, err
				}
				_ = root.Chtimes(d.name, d.hdr.ModTime, d.hdr.ModTime)
			}
			return res, nil
		}
		if err != nil {
			return res, fmt.Errorf("tar from the sandbox: %w", err)
		}
		name := path.Clean(renamed(hdr.Name, from, top))
		if name == "." || name == "" {
			continue
		}
		if name == ".." || strings.HasPrefix(name, "../") || len(name) > api.MaxTarName {
			return res, fmt.Errorf("tar from the sandbox: entry %q leaves %s", safe(hdr.Name), dir)
		}
		if d := path.Dir(name); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return res, err
			}
		}
		perm := os.FileMode(hdr.Mode & 0o777)
		if archive && asRoot {
			perm |= specialMode(hdr.Mode)
		} else {
			perm |= specialMode(hdr.Mode & 0o1000) // sticky only
		}
		if fi, err := root.Lstat(name); err == nil && !fi.IsDir() {
			root.Remove(name)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return res, err
			}
		case tar.TypeReg:
			f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return res, err
			}
			n, err := io.Copy(f, tr)
			res.Bytes += n
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return res, err
			}
		case tar.TypeSymlink:
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return res, err
			}
			res.Entries++
			continue
		case tar.TypeLink:
			old := path.Clean(renamed(hdr.Linkname, from, top))
			if old == ".." || strings.HasPrefix(old, "../") {
				return res, fmt.Errorf("tar from the sandbox: hard link %q leaves %s", safe(hdr.Name), dir)
			}
			if err := root.Link(old, name); err != nil {
				return res, err
			}
			res.Entries++
			continue
		default:
			continue // devices, FIFOs: not made
		}
		res.Entries++
		if archive && asRoot {
			if err := root.Lchown(name, hdr.Uid, hdr.Gid); err != nil {
				return res, err
			}
		}
		if hdr.Typeflag == tar.TypeDir {
			dirs = append(dirs, dirMode{name, perm, hdr})
			continue
		}
		if err := root.Chmod(name, perm); err != nil {
			return res, err
		}
		_ = root.Chtimes(name, hdr.ModTime, hdr.ModTime)
	}
}

// specialMode is the setuid, setgid and sticky bits of a tar mode.
func specialMode(m int64) os.FileMode {
	var fm os.FileMode
	if m&syscall.S_ISUID != 0 {
		fm |= os.ModeSetuid
	}
	if m&syscall.S_ISGID != 0 {
		fm |= os.ModeSetgid
	}
	if m&syscall.S_ISVTX != 0 {
		fm |= os.ModeSticky
	}
	return fm
}
