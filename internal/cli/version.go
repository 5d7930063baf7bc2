package cli

import (
	"context"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-sandbox/cairn/api"
)

// Version is cairn's version, set at build time with
// -ldflags "-X github.com/cairn-sandbox/cairn/internal/cli.Version=…".
// Left at "dev", the module version of the build is used if known.
var Version = "dev"

// versionOptions are the flags of cairn version (none yet).
type versionOptions struct{}

func newVersionCommand(g *globalOptions) *cobra.Command {
	var opts versionOptions
	return &cobra.Command{
		Use:   "version",
		Short: "Show the versions of cairn and cairnd",
		Long: `Show the version of this cairn and, if cairnd answers, the daemon's
version, account, runtime and pool. An unreachable daemon is reported but is
not an error.`,
		Example: `  cairn version
  cairn version --json`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runVersion(cmd.Context(), opts, g)
		},
	}
}

// versionJSON is the --json output of cairn version.
type versionJSON struct {
	Client struct {
		Version string `json:"version"`
	} `json:"client"`
	Server      *api.ServerInfo `json:"server"`                 // null if cairnd did not answer
	ServerError string          `json:"server_error,omitempty"` // why it did not
}

func runVersion(ctx context.Context, _ versionOptions, g *globalOptions) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var out versionJSON
	out.Client.Version = cliVersion()
	info, err := g.client().ServerInfo(ctx)
	if err == nil {
		out.Server = &info
	} else {
		out.ServerError = err.Error()
	}
	if g.JSON {
		return g.printJSON(out)
	}
	g.printf("cairn   %s\n", out.Client.Version)
	if out.Server == nil {
		g.printf("cairnd  not reachable: %s\n", out.ServerError)
		return nil
	}
	g.printf("cairnd  %s (account %s, runtime %s, pool %s)\n",
		info.Version, orDash(info.Account), orDash(info.Runtime), orDash(info.Pool))
	return nil
}

func cliVersion() string {
	if Version != "dev" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return Version
}
