package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
)

// cairn files: a running sandbox's files, as the sandbox sees them (the
// Files API, docs/files.md). cairn cp (cp.go) copies trees in and out.

func newFilesCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "files",
		Short: "Work on a running sandbox's files",
		Long: `Read, write, list, remove, rename and watch the files of a running sandbox.
Paths are absolute, and resolved inside the sandbox as it sees them: a link to
/etc/shadow is the sandbox's /etc/shadow, and /../.. is /. cairn-init does the
work inside, as root. To copy files and directories in and out, use cairn cp.
See docs/files.md.`,
	}
	cmd.AddCommand(newFilesLsCommand(g), newFilesCatCommand(g), newFilesWriteCommand(g), newFilesStatCommand(g),
		newFilesRmCommand(g), newFilesMkdirCommand(g), newFilesMvCommand(g), newFilesWatchCommand(g))
	return cmd
}

// filesLsOptions are the arguments of cairn files ls.
type filesLsOptions struct {
	Name, Path string
	Depth      int
}

func newFilesLsCommand(g *globalOptions) *cobra.Command {
	var opts filesLsOptions
	cmd := &cobra.Command{
		Use:   "ls NAME PATH",
		Short: "List a directory of a sandbox",
		Long: `List the entries of the directory PATH in the sandbox: type and mode, owner,
group, size, modification time and path (a link with its target). With
--depth N, N levels deep, each directory's entries after it.`,
		Example: `  cairn files ls web /etc
  cairn files ls web /srv --depth 3 --json`,
		Args: exactArgs("NAME", "PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name, opts.Path = args[0], args[1]
			return runFilesLs(cmd.Context(), opts, g)
		},
	}
	cmd.Flags().IntVarP(&opts.Depth, "depth", "d", 1, fmt.Sprintf("levels to list, 1 to %d", api.MaxListDepth))
	return cmd
}

func runFilesLs(ctx context.Context, opts filesLsOptions, g *globalOptions) error {
	list, err := g.client().ListFiles(ctx, opts.Name, opts.Path, opts.Depth)
	if err != nil {
		return err
	}
	if g.JSON {
		if list == nil {
			list = []api.FileEntry{}
		}
		return g.printJSON(list)
	}
	t := newTable(g.stdout, "MODE", "OWNER", "GROUP", "SIZE", "MODIFIED", "PATH")
	now := g.now()
	for _, e := range list {
		p := e.Path
		if e.Type == api.FileTypeSymlink {
			p += " -> " + e.SymlinkTarget
		}
		t.Row(e.Permissions, ownerName(e.Owner, e.UID), ownerName(e.Group, e.GID), strconv.FormatInt(e.Size, 10), formatAge(now, e.ModTime), p)
	}
	return t.Flush()
}

func ownerName(name string, id uint32) string {
	if name != "" {
		return name
	}
	return strconv.FormatUint(uint64(id), 10)
}

// filesPathOptions are the arguments of the files commands on one path.
type filesPathOptions struct {
	Name, Path string
	Recursive  bool
	Parents    bool
	Mode       string
	Owner      string
}

// mode parses --mode: octal, at most 07777; nil if not given.
func (o filesPathOptions) mode() (*uint32, error) {
	if o.Mode == "" {
		return nil, nil
	}
	m, err := strconv.ParseUint(o.Mode, 8, 32)
	if err != nil || m > 0o7777 {
		return nil, usageErrorf("--mode %q: want an octal mode such as 0644", o.Mode)
	}
	v := uint32(m)
	return &v, nil
}

func newFilesCatCommand(g *globalOptions) *cobra.Command {
	var opts filesPathOptions
	return &cobra.Command{
		Use:   "cat NAME PATH",
		Short: "Print a file of a sandbox",
		Long: `Write the content of the file PATH of the sandbox to stdout, as it streams.
On a terminal, bytes a terminal would obey (escape sequences) are shown
escaped; into a pipe or a file they are written exactly.`,
		Example: `  cairn files cat web /etc/os-release
  cairn files cat web /var/lib/app/db.sqlite > db.sqlite`,
		Args: exactArgs("NAME", "PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name, opts.Path = args[0], args[1]
			return runFilesCat(cmd.Context(), opts, g)
		},
	}
}

func runFilesCat(ctx context.Context, opts filesPathOptions, g *globalOptions) error {
	rc, err := g.client().ReadFile(ctx, opts.Name, opts.Path)
	if err != nil {
		return err
	}
	defer rc.Close()
	if terminalFd(g.stdout) < 0 {
		_, err = io.Copy(g.stdout, rc)
		return err
	}
	// A terminal: escaped, a chunk at a time (a character cut between two
	// chunks shows as its bytes).
	buf := make([]byte, 64<<10)
	for {
		n, err := rc.Read(buf)
		if n > 0 {
			io.WriteString(g.stdout, escapeText(string(buf[:n]), true))
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func newFilesWriteCommand(g *globalOptions) *cobra.Command {
	var opts filesPathOptions
	cmd := &cobra.Command{
		Use:   "write NAME PATH",
		Short: "Write stdin to a file of a sandbox",
		Long: `Write what stdin holds to the file PATH of the sandbox, streaming it. The file
is replaced only once all of it is there; missing parent directories are
made. An existing file keeps its mode and owner unless --mode or --owner say
otherwise.`,
		Example: `  echo hello | cairn files write web /tmp/hello
  cairn files write web /srv/app.tar.gz --mode 0600 --owner app < app.tar.gz`,
		Args: exactArgs("NAME", "PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name, opts.Path = args[0], args[1]
			return runFilesWrite(cmd.Context(), opts, g)
		},
	}
	cmd.Flags().StringVar(&opts.Mode, "mode", "", "permission bits, octal (default 0644 for a new file)")
	cmd.Flags().StringVar(&opts.Owner, "owner", "", "user[:group] or uid[:gid] inside (default root)")
	return cmd
}

func runFilesWrite(ctx context.Context, opts filesPathOptions, g *globalOptions) error {
	mode, err := opts.mode()
	if err != nil {
		return err
	}
	e, err := g.client().WriteFile(ctx, opts.Name, opts.Path, g.stdin, client.WriteOptions{Mode: mode, Owner: opts.Owner})
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(e)
	}
	g.printf("Wrote %s (%s)\n", e.Path, formatSize(e.Size))
	return nil
}

func newFilesStatCommand(g *globalOptions) *cobra.Command {
	var opts filesPathOptions
	return &cobra.Command{
		Use:     "stat NAME PATH",
		Short:   "Show a file's entry in a sandbox",
		Long:    `Show the type, mode, owner, size and time of PATH in the sandbox (a link is itself).`,
		Example: `  cairn files stat web /etc/passwd --json`,
		Args:    exactArgs("NAME", "PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name, opts.Path = args[0], args[1]
			e, err := g.client().StatFile(cmd.Context(), opts.Name, opts.Path)
			if err != nil {
				return err
			}
			if g.JSON {
				return g.printJSON(e)
			}
			t := newTable(g.stdout)
			t.Row("path", e.Path)
			t.Row("type", e.Type)
			if e.SymlinkTarget != "" {
				t.Row("target", e.SymlinkTarget)
			}
			t.Row("mode", fmt.Sprintf("%s (%04o)", e.Permissions, e.Mode))
			t.Row("owner", ownerName(e.Owner, e.UID)+":"+ownerName(e.Group, e.GID))
			t.Row("size", strconv.FormatInt(e.Size, 10))
			t.Row("modified", e.ModTime.Format(time.RFC3339))
			return t.Flush()
		},
	}
}

func newFilesRmCommand(g *globalOptions) *cobra.Command {
	var opts filesPathOptions
	cmd := &cobra.Command{
		Use:     "rm NAME PATH",
		Short:   "Remove a file or directory of a sandbox",
		Long:    `Remove PATH in the sandbox; a directory only if empty, unless -r.`,
		Example: `  cairn files rm web /tmp/build -r`,
		Args:    exactArgs("NAME", "PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name, opts.Path = args[0], args[1]
			if err := g.client().RemoveFile(cmd.Context(), opts.Name, opts.Path, opts.Recursive); err != nil {
				return err
			}
			if g.JSON {
				return g.printJSON(map[string]string{"deleted": opts.Path})
			}
			g.printf("Removed %s\n", opts.Path)
			return nil
		},
	}
	cmd.Flags().BoolVarP(&opts.Recursive, "recursive", "r", false, "a directory with all it holds")
	return cmd
}

func newFilesMkdirCommand(g *globalOptions) *cobra.Command {
	var opts filesPathOptions
	cmd := &cobra.Command{
		Use:   "mkdir NAME PATH",
		Short: "Make a directory in a sandbox",
		Long:  `Make the directory PATH in the sandbox; with -p its missing parents too, and an existing directory is no error.`,
		Example: `  cairn files mkdir web /srv/data -p
  cairn files mkdir web /home/app/cache --owner app --mode 0700`,
		Args: exactArgs("NAME", "PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name, opts.Path = args[0], args[1]
			mode, err := opts.mode()
			if err != nil {
				return err
			}
			e, created, err := g.client().MakeDir(cmd.Context(), opts.Name, api.MakeDirRequest{Path: opts.Path, Mode: mode, Owner: opts.Owner, Parents: opts.Parents})
			if err != nil {
				return err
			}
			if g.JSON {
				return g.printJSON(e)
			}
			if created {
				g.printf("Made %s\n", e.Path)
			} else {
				g.printf("%s exists already\n", e.Path)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&opts.Parents, "parents", "p", false, "make missing parents; an existing directory is no error")
	cmd.Flags().StringVar(&opts.Mode, "mode", "", "permission bits, octal (default 0755)")
	cmd.Flags().StringVar(&opts.Owner, "owner", "", "user[:group] or uid[:gid] inside (default root)")
	return cmd
}

func newFilesMvCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "mv NAME SRC DST",
		Short:   "Rename a file or directory of a sandbox",
		Long:    `Rename SRC to DST in the sandbox, as rename(2) does: a file or empty directory at DST is replaced.`,
		Example: `  cairn files mv web /srv/new /srv/current`,
		Args:    exactArgs("NAME", "SRC", "DST"),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := g.client().RenameFile(cmd.Context(), args[0], args[1], args[2])
			if err != nil {
				return err
			}
			if g.JSON {
				return g.printJSON(e)
			}
			g.printf("Renamed %s to %s\n", args[1], e.Path)
			return nil
		},
	}
}

func newFilesWatchCommand(g *globalOptions) *cobra.Command {
	var opts filesPathOptions
	cmd := &cobra.Command{
		Use:   "watch NAME PATH",
		Short: "Show changes under a directory of a sandbox as they happen",
		Long: `Print each change made inside the sandbox under the directory PATH (create,
write, remove, rename, chmod), one a line, until interrupted. With -r its
subdirectories too. --json prints one JSON event a line (NDJSON).`,
		Example: `  cairn files watch web /srv -r
  cairn files watch web /tmp --json`,
		Args: exactArgs("NAME", "PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name, opts.Path = args[0], args[1]
			return runFilesWatch(cmd.Context(), opts, g)
		},
	}
	cmd.Flags().BoolVarP(&opts.Recursive, "recursive", "r", false, "watch the subdirectories too")
	return cmd
}

func runFilesWatch(ctx context.Context, opts filesPathOptions, g *globalOptions) error {
	return g.client().WatchDir(ctx, opts.Name, opts.Path, opts.Recursive, func(ev api.FileEvent) error {
		if g.JSON {
			b, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			_, err = g.stdout.Write(safeJSON(append(b, '\n')))
			return err
		}
		line := fmt.Sprintf("%-7s %s", ev.Type, ev.Path)
		if ev.To != "" {
			line += " -> " + ev.To
		}
		_, err := fmt.Fprintln(g.stdout, strings.TrimRight(safe(line), " "))
		return err
	})
}
