package cli

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/image/buildctx"
)

// imageBuildOptions are the arguments and flags of cairn image build.
type imageBuildOptions struct {
	Dir, File, Name string
	BuildArgs       []string
	Network         string
	NoCache         bool
	Insecure        bool
	Memory          string  // each RUN step's
	CPUs            float64 // each RUN step's
	StepTimeout     string
}

func newImageBuildCommand(g *globalOptions) *cobra.Command {
	var opts imageBuildOptions
	cmd := &cobra.Command{
		Use:   "build DIR -t NAME [-f Dockerfile]",
		Short: "Build an image from a Dockerfile, each step cached",
		Long: `Build the image NAME from the Dockerfile in DIR (or -f FILE), with DIR as
the build context: what COPY and ADD read, minus what DIR/.dockerignore
excludes. The context is sent to cairnd, which runs each step: RUN in a
gVisor sandbox of its own over the image so far (with the network rules
of a new sandbox, or none with --network none), COPY and ADD from the
context. FROM takes a cairn image (busybox, debian, one pulled, imported
or built) or a registry reference, pulled if cairn does not have it.

Each RUN step is bounded: --memory (default 2G), --cpus (default: every
core cairnd allows) and --step-timeout (default 30m), each at most what
cairnd allows (its --build-max-memory, --build-max-cpus,
--build-max-step-timeout). A step past its time is ended (I11), one that
uses more memory than its limit too (I12), and the build fails leaving
nothing of that step.

Each step's result is cached in your account's cache (another account's
steps are never used): building an unchanged Dockerfile again is instant,
and a change (to an instruction, a build argument or a copied file) runs
again from that step on. Output of each step is streamed.

The context is sent as plain files: directories, regular files and
symbolic links (as links), owned by root, without setuid or setgid bits;
devices, sockets and FIFOs are left out, and a name that is not UTF-8 or
holds control characters is refused (exclude it in .dockerignore).

Supported: FROM (one stage), RUN, COPY, ADD (local files and archives),
ENV, ARG, WORKDIR, USER, EXPOSE, CMD, ENTRYPOINT, LABEL. Anything else is
an error naming its line (I09); a failing step is I10.`,
		Example: `  cairn image build . -t app
  cairn image build ./svc -f ./svc/Dockerfile.dev -t svc-dev --build-arg VERSION=1.2
  cairn image build . -t big --memory 8G --cpus 4 --step-timeout 2h
  cairn create dev --image app`,
		Args: exactArgs("DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Dir = args[0]
			return runImageBuild(cmd.Context(), opts, g)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.Name, "tag", "t", "", "the image's name in cairn (required)")
	f.StringVarP(&opts.File, "file", "f", "", "the Dockerfile (default DIR/Dockerfile)")
	f.StringArrayVar(&opts.BuildArgs, "build-arg", nil, "a build argument KEY=VALUE (repeatable); KEY alone takes it from the environment")
	f.StringVar(&opts.Network, "network", "egress", "RUN steps' network: egress (the default rules of a sandbox) or none")
	f.BoolVar(&opts.NoCache, "no-cache", false, "run every step, neither using nor filling the cache")
	f.BoolVar(&opts.Insecure, "insecure", false, "a FROM's registry may be plain HTTP")
	boundedSizeVar(f, &opts.Memory, "memory", api.MinMemoryBytes, api.MaxMemoryBytes, "each RUN step's memory limit, e.g. 512M, 4G; 64M to cairnd's --build-max-memory (default: 2G)")
	boundedFloatVar(f, &opts.CPUs, "cpus", api.MinCPUs, api.MaxCPUs, false, "each RUN step's CPU limit, e.g. 1.5, at most cairnd's --build-max-cpus (default: that, or the host's cores)")
	boundedDurationVar(f, &opts.StepTimeout, "step-timeout", api.MinStepTimeout, api.MaxStepTimeout, time.Second, "each RUN step's time limit, e.g. 10m, 2h; at most cairnd's --build-max-step-timeout (default: 30m)")
	return cmd
}

func runImageBuild(ctx context.Context, opts imageBuildOptions, g *globalOptions) error {
	if opts.Name == "" {
		return usageErrorf("image build needs -t NAME")
	}
	if opts.Network != "egress" && opts.Network != "none" {
		return usageErrorf("--network is egress or none, not %q", opts.Network)
	}
	fi, err := os.Stat(opts.Dir)
	if err != nil {
		return usageErrorf("%v", err)
	}
	if !fi.IsDir() {
		return usageErrorf("%s is not a directory (the build context)", opts.Dir)
	}
	if opts.File == "" {
		opts.File = filepath.Join(opts.Dir, "Dockerfile")
	}
	if _, err := os.Stat(opts.File); err != nil {
		return usageErrorf("no Dockerfile: %v", err)
	}
	req := api.BuildImageRequest{Name: opts.Name, Network: opts.Network, NoCache: opts.NoCache, Insecure: opts.Insecure,
		Memory: opts.Memory, CPUs: opts.CPUs, StepTimeout: opts.StepTimeout}
	if abs, err := filepath.Abs(opts.Dir); err == nil {
		req.Source = abs
	}
	for _, kv := range opts.BuildArgs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			v, ok = os.LookupEnv(k)
			if !ok {
				continue // as docker: a KEY alone that is not set is not passed
			}
		}
		if k == "" {
			return usageErrorf("--build-arg %q: no KEY", kv)
		}
		if req.BuildArgs == nil {
			req.BuildArgs = map[string]string{}
		}
		req.BuildArgs[k] = v
	}
	pr, pw := io.Pipe()
	type written struct {
		buildctx.Stats
		err error
	}
	sent := make(chan written, 1)
	go func() {
		st, err := buildctx.WriteContext(pw, opts.Dir, buildctx.WriteOptions{Dockerfile: opts.File})
		pw.CloseWithError(err)
		sent <- written{st, err}
	}()
	op, err := g.client().BuildImage(ctx, pr, req)
	pr.Close()
	st := <-sent
	if st.err != nil {
		return usageErrorf("the build context: %v", st.err)
	}
	if err != nil {
		return err
	}
	if !g.JSON {
		g.eprintf("Sent the build context: %d files, %s\n", st.Files, formatSize(st.Bytes))
	}
	return followImage(ctx, g, op)
}
