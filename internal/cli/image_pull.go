package cli

import (
	"bufio"
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-sandbox/cairn/api"
)

// imagePullOptions are the flags of cairn image pull.
type imagePullOptions struct {
	Ref, Name     string
	Insecure      bool
	Username      string
	PasswordStdin bool
}

func newImagePullCommand(g *globalOptions) *cobra.Command {
	var opts imagePullOptions
	cmd := &cobra.Command{
		Use:   "pull REF [--name NAME] [--insecure] [--username USER --password-stdin]",
		Short: "Pull an image from an OCI or Docker registry",
		Long: `Pull an image from a registry (Docker Hub, GHCR, a private one) and make it
an image sandboxes can start from: cairn create NAME --image IMAGE.

REF is a registry reference: python:3.12 (Docker Hub), ghcr.io/org/app:1,
registry.example.com:5000/team/app@sha256:…. A multi-arch image resolves to
this host's platform. Every layer is checked against its digest and applied
in order into one read-only image; its config (environment, working
directory, user, command, exposed ports) is kept with it (cairn image info).
Pulling a digest cairn holds already, under any name, fetches no layer.

The image's name is --name, or the last part of the repository and the tag
(python-3.12). Credentials: --username with the password on standard input
(--password-stdin), else those of ~/.docker/config.json (or $DOCKER_CONFIG)
of cairnd's user. --insecure allows a registry that speaks plain HTTP.`,
		Example: `  cairn image pull python:3.12
  cairn image pull 127.0.0.1:5000/team/app:1 --name app --insecure
  echo "$TOKEN" | cairn image pull ghcr.io/org/private:2 --username me --password-stdin`,
		Args: exactArgs("REF"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Ref = args[0]
			return runImagePull(cmd.Context(), opts, g)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Name, "name", "", "the image's name in cairn (default: from the reference, e.g. python-3.12)")
	f.BoolVar(&opts.Insecure, "insecure", false, "allow a registry that speaks plain HTTP")
	f.StringVar(&opts.Username, "username", "", "the registry's user name (with --password-stdin)")
	f.BoolVar(&opts.PasswordStdin, "password-stdin", false, "read the registry's password or token from standard input")
	return cmd
}

func runImagePull(ctx context.Context, opts imagePullOptions, g *globalOptions) error {
	req := api.PullImageRequest{Ref: opts.Ref, Name: opts.Name, Insecure: opts.Insecure, Username: opts.Username}
	if opts.PasswordStdin {
		if opts.Username == "" {
			return usageErrorf("--password-stdin needs --username")
		}
		line, err := bufio.NewReader(g.stdin).ReadString('\n')
		if err != nil && line == "" {
			return usageErrorf("--password-stdin: nothing on standard input")
		}
		req.Password = strings.TrimRight(line, "\r\n")
	} else if opts.Username != "" {
		return usageErrorf("--username needs --password-stdin (a password on the command line would show in ps)")
	}
	c := g.client()
	op, err := c.PullImage(ctx, req)
	if err != nil {
		return err
	}
	return followImage(ctx, g, op)
}

// followImage follows a pull or an import to its image, showing its
// progress, and prints the image.
func followImage(ctx context.Context, g *globalOptions, op api.Operation) error {
	events := g.events()
	img, err := g.client().WaitImage(ctx, op, events.print)
	events.end()
	if err != nil {
		return followError(ctx, op, "", err)
	}
	if g.JSON {
		return g.printJSON(img)
	}
	g.printf("image %s: %s (%s)\n", img.Name, img.Digest, formatSize(img.SizeBytes))
	return nil
}

func newImageInfoCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "info NAME",
		Short:   "Show an image: where it came from, its digest, size and config",
		Example: "  cairn image info python-3.12\n  cairn image info app --json",
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			img, err := g.client().Image(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if g.JSON {
				return g.printJSON(img)
			}
			t := newTable(g.stdout)
			t.Row("name", img.Name)
			t.Row("description", img.Description)
			t.Row("ready", yesNo(img.Ready))
			if img.Digest != "" {
				t.Row("digest", img.Digest)
				t.Row("source", img.Source)
				t.Row("size", formatSize(img.SizeBytes))
			}
			if !img.CreatedAt.IsZero() {
				t.Row("created", img.CreatedAt.Local().Format("2006-01-02 15:04:05"))
			}
			if c := img.Config; c != nil {
				t.Row("env", orDash(safeJoin(c.Env)))
				t.Row("entrypoint", orDash(safeJoin(c.Entrypoint)))
				t.Row("cmd", orDash(safeJoin(c.Cmd)))
				t.Row("working dir", orDash(c.WorkingDir))
				t.Row("user", orDash(c.User))
				ports := make([]string, len(c.ExposedPorts))
				for i, p := range c.ExposedPorts {
					ports[i] = fmt.Sprint(p)
				}
				t.Row("exposed ports", orDash(strings.Join(ports, ", ")))
			}
			return t.Flush()
		},
	}
}

func newImageDeleteCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "delete NAME",
		Aliases: []string{"rm"},
		Short:   "Delete an image",
		Long: `Delete an image. A pulled image that sandboxes or checkpoints still use is
refused (I08); a built-in one's files go and are built again on first use.`,
		Example: "  cairn image delete app",
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.client().DeleteImage(cmd.Context(), args[0]); err != nil {
				return err
			}
			if g.JSON {
				return g.printJSON(map[string]string{"deleted": args[0]})
			}
			g.printf("deleted image %s\n", args[0])
			return nil
		},
	}
}
