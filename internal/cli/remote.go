package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-sandbox/cairn/client"
)

// A remote cairnd. cairn reaches cairnd over its unix socket unless told
// of a remote one: --host / $CAIRN_HOST (https://HOST:PORT) with --token /
// $CAIRN_TOKEN, or what `cairn login` stored in the config file
// (~/.config/cairn/config.json, 0600: the host, the token and the
// fingerprint of the server's certificate, pinned on first use). An
// explicit --socket wins over all of them.

// remoteConfig is the config file's content.
type remoteConfig struct {
	Host        string `json:"host"`
	Token       string `json:"token,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"`
}

// configPath is where cairn keeps its config file.
func configPath() (string, error) {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no home directory for the config file: %w", err)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "cairn", "config.json"), nil
}

// loadConfig reads the config file; a missing one is empty.
func loadConfig() (remoteConfig, error) {
	var c remoteConfig
	p, err := configPath()
	if err != nil {
		return c, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("%s: %w", p, err)
	}
	return c, nil
}

// saveConfig writes the config file (0600, its directory 0700).
func saveConfig(c remoteConfig) (string, error) {
	p, err := configPath()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", err
	}
	b, _ := json.MarshalIndent(c, "", "  ")
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return "", err
	}
	return p, os.Rename(tmp, p)
}

// connect sets the client the command uses: the remote cairnd the flags,
// the environment or the config file name, else the unix socket.
func (g *globalOptions) connect(cmd *cobra.Command) error {
	if cmd.Flags().Changed("socket") {
		return nil
	}
	host, token := g.Host, g.Token
	if host == "" {
		host = os.Getenv("CAIRN_HOST")
	}
	if token == "" {
		token = os.Getenv("CAIRN_TOKEN")
	}
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	if host == "" {
		host = cfg.Host
	}
	if host == "" {
		if token != "" {
			return usageErrorf("--token needs --host (or CAIRN_HOST): the unix socket takes no token")
		}
		return nil
	}
	fingerprint := os.Getenv("CAIRN_TLS_FINGERPRINT")
	if sameHost(host, cfg.Host) {
		if token == "" {
			token = cfg.Token
		}
		if fingerprint == "" {
			fingerprint = cfg.Fingerprint
		}
	}
	if token == "" {
		return usageErrorf("no API token for %s: `cairn login %s`, or --token / CAIRN_TOKEN", host, host)
	}
	c, err := client.NewRemote(client.Remote{URL: host, Token: token, Fingerprint: fingerprint})
	if err != nil {
		return usageErrorf("%v", err)
	}
	g.remote = c
	return nil
}

// sameHost reports whether two server URLs name one server.
func sameHost(a, b string) bool {
	return a != "" && strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/")
}

// loginOptions are the flags of cairn login.
type loginOptions struct {
	URL, Token, Fingerprint string
	TokenStdin, Yes         bool
}

func newLoginCommand(g *globalOptions) *cobra.Command {
	var opts loginOptions
	cmd := &cobra.Command{
		Use:   "login https://HOST:PORT",
		Short: "Log in to a remote cairnd with an API token",
		Long: `Log in to the cairnd listening at https://HOST:PORT (cairnd --listen) with
an API token (made by an admin: cairn token create). The token is
checked, then stored with the host and the fingerprint of the server's
certificate in ~/.config/cairn/config.json (0600); every cairn command
then goes there, until cairn logout.

The certificate is trusted on first use, as ssh does: cairn shows its
fingerprint (compare it with cairnd's log or cairn server info on the
host) and asks, or takes --fingerprint to check it against, or --yes.
Once pinned, a server showing another certificate is refused.

Without --token (or CAIRN_TOKEN) the token is asked for: typed on a
terminal, it is not shown; from a pipe or a file (or with --token-stdin),
the first line of standard input is the token.`,
		Example: `  cairn login https://cairn.example:7443 --token-stdin < token.txt
  cairn login https://10.0.0.5:7443 --token "$TOKEN" --fingerprint sha256:3f1c…`,
		Args: exactArgs("https://HOST:PORT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.URL = strings.TrimSuffix(args[0], "/")
			opts.Token = g.Token // the global --token
			return runLogin(cmd.Context(), opts, g)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.TokenStdin, "token-stdin", false, "read the token from standard input")
	f.StringVar(&opts.Fingerprint, "fingerprint", "", "the certificate's expected fingerprint (sha256:…)")
	f.BoolVar(&opts.Yes, "yes", false, "trust the certificate shown without asking")
	return cmd
}

func runLogin(ctx context.Context, opts loginOptions, g *globalOptions) error {
	token := opts.Token
	if token == "" {
		token = os.Getenv("CAIRN_TOKEN")
	}
	if opts.TokenStdin || token == "" {
		// On a terminal without echo; from a pipe, its first line.
		t, err := g.readSecret("API token: ")
		if err != nil {
			return fmt.Errorf("read the API token: %w", err)
		}
		token = t
	}
	if token == "" {
		return usageErrorf("login needs an API token")
	}
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	pin := strings.ToLower(opts.Fingerprint)
	if pin == "" && sameHost(opts.URL, cfg.Host) {
		pin = cfg.Fingerprint // a changed certificate is refused
	}
	var seen string
	c, err := client.NewRemote(client.Remote{URL: opts.URL, Token: token, Fingerprint: pin, Seen: func(fp string) { seen = fp }})
	if err != nil {
		return usageErrorf("%v", err)
	}
	if pin == "" {
		// A certificate that verifies against the system's roots (one the
		// operator gave cairnd) is not pinned: its renewals must go on
		// working.
		if ca, err := client.NewRemote(client.Remote{URL: opts.URL, Token: token}); err == nil {
			if _, err := ca.ServerInfo(ctx); err == nil {
				c, seen = ca, "verified"
			}
		}
	}
	if pin == "" && seen != "verified" {
		// First use: look at the certificate, then decide.
		if _, err := c.ServerInfo(ctx); err != nil && seen == "" {
			return err
		}
		if !opts.Yes && !confirm(g, fmt.Sprintf("The server's certificate fingerprint is %s.\nTrust it? [y/N] ", seen)) {
			return fmt.Errorf("not logged in: the certificate was not trusted")
		}
		pin = seen
		if c, err = client.NewRemote(client.Remote{URL: opts.URL, Token: token, Fingerprint: pin}); err != nil {
			return err
		}
	}
	who, err := c.Whoami(ctx)
	if err != nil {
		return err
	}
	if seen == "verified" {
		pin = ""
	}
	path, err := saveConfig(remoteConfig{Host: opts.URL, Token: token, Fingerprint: pin})
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(who)
	}
	g.printf("Logged in to %s as %s (account %s, role %s); saved in %s\n", opts.URL, who.TokenName, who.Account, who.Role, path)
	return nil
}

func newLogoutCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "Forget the remote cairnd and token cairn login stored",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := configPath()
			if err != nil {
				return err
			}
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			if !g.JSON {
				g.printf("Logged out; cairn uses the unix socket again\n")
			}
			return nil
		},
	}
}

func newWhoamiCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "whoami",
		Short: "Show the account and role your requests speak for",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			who, err := g.client().Whoami(cmd.Context())
			if err != nil {
				return err
			}
			if g.JSON {
				return g.printJSON(who)
			}
			t := newTable(g.stdout)
			t.Row("account", who.Account)
			t.Row("role", who.Role)
			if who.TokenID != "" {
				t.Row("token", fmt.Sprintf("%s (%s)", who.TokenName, who.TokenID))
			}
			t.Row("via", who.Via)
			return t.Flush()
		},
	}
}

func newServerCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "server",
		Short: "About the cairnd you talk to",
		Args:  groupArgs,
		RunE:  showHelp,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "info",
		Short: "Show cairnd's version, runtime, pool and HTTPS listener with its certificate's fingerprint",
		Args:  exactArgs(),
		RunE: func(c *cobra.Command, _ []string) error {
			info, err := g.client().ServerInfo(c.Context())
			if err != nil {
				return err
			}
			if g.JSON {
				return g.printJSON(info)
			}
			t := newTable(g.stdout)
			t.Row("version", info.Version)
			t.Row("runtime", info.Runtime)
			t.Row("pool", info.Pool)
			if info.Listen != "" {
				t.Row("listen", info.Listen)
				t.Row("fingerprint", info.TLSFingerprint)
			} else {
				t.Row("listen", "none (cairnd --listen ADDR:PORT serves the API over HTTPS)")
			}
			return t.Flush()
		},
	})
	return cmd
}
