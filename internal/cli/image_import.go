package cli

import (
	"archive/tar"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// imageImportOptions are the arguments and flags of cairn image import.
type imageImportOptions struct {
	Path, Name string
}

func newImageImportCommand(g *globalOptions) *cobra.Command {
	var opts imageImportOptions
	cmd := &cobra.Command{
		Use:   "import FILE|DIR|- --name NAME",
		Short: "Import an image from a docker save archive or an OCI image layout",
		Long: `Import an image from a file, for hosts without a registry: the tar that
docker save (or podman save) writes, an OCI image layout as a tar or as a
directory (oci-layout, index.json, blobs/), or a gzip of a tar; - reads it
from standard input. The archive is sent to cairnd, checked as a pull is
(every layer against its config's digests) and applied into a new image.
An OCI layout with several images takes this host's platform's.`,
		Example: `  docker save app:1 | cairn image import - --name app
  cairn image import app.tar --name app
  cairn image import ./layout --name app`,
		Args: exactArgs("FILE|DIR|-"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Path = args[0]
			return runImageImport(cmd.Context(), opts, g)
		},
	}
	cmd.Flags().StringVar(&opts.Name, "name", "", "the image's name in cairn (required)")
	return cmd
}

func runImageImport(ctx context.Context, opts imageImportOptions, g *globalOptions) error {
	if opts.Name == "" {
		return usageErrorf("image import needs --name NAME")
	}
	var body io.Reader
	source := filepath.Base(opts.Path)
	switch fi, err := os.Stat(opts.Path); {
	case opts.Path == "-":
		body, source = g.stdin, "stdin"
	case err != nil:
		return usageErrorf("%v", err)
	case fi.IsDir():
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(tarDir(pw, opts.Path)) }()
		defer pr.Close()
		body = pr
	default:
		f, err := os.Open(opts.Path)
		if err != nil {
			return usageErrorf("%v", err)
		}
		defer f.Close()
		body = f
	}
	op, err := g.client().ImportImage(ctx, body, opts.Name, source)
	if err != nil {
		return err
	}
	return followImage(ctx, g, op)
}

// tarDir writes the regular files and directories under dir to w as a tar
// (an OCI layout directory); links and other files are left out.
func tarDir(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() && !info.IsDir() {
			return nil
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if info.IsDir() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
