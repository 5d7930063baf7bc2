package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// The accounts and tokens commands (admin): cairn account create, list,
// show, set, delete; cairn token create, list, revoke. `cairn account`
// alone shows your own account (account.go).

func accountSubcommands(g *globalOptions) []*cobra.Command {
	var limit string
	create := &cobra.Command{
		Use:   "create NAME [--disk-limit SIZE]",
		Short: "Make an account (admin)",
		Long: `Make an account: its own sandboxes, checkpoints, snapshots and names, and a
disk limit (--disk-limit; default the host's, cairnd --disk-limit). Then
give it a token: cairn token create --account NAME.`,
		Example: "  cairn account create team-a --disk-limit 200G\n  cairn token create --account team-a --name ci",
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			acct, err := g.client().CreateAccount(cmd.Context(), api.CreateAccountRequest{Name: args[0], DiskLimit: limit})
			if err != nil {
				return err
			}
			return printAccountRecord(g, acct, "Account created: ")
		},
	}
	create.Flags().StringVar(&limit, "disk-limit", "", "the account's disk limit, e.g. 100G (default: the host's)")

	list := &cobra.Command{
		Use:   "list",
		Short: "List the accounts (admin)",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := g.client().Accounts(cmd.Context())
			if err != nil {
				return err
			}
			if g.JSON {
				return g.printJSON(list)
			}
			t := newTable(g.stdout, "NAME", "DISK LIMIT", "CREATED")
			for _, a := range list {
				t.Row(a.Name, formatLimit(a.DiskLimit), formatAge(g.now(), a.CreatedAt))
			}
			return t.Flush()
		},
	}

	show := &cobra.Command{
		Use:   "show NAME",
		Short: "Show an account and its tokens (admin)",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			acct, err := findAccount(ctx, g, args[0])
			if err != nil {
				return err
			}
			tokens, err := g.client().Tokens(ctx, acct.Name)
			if err != nil {
				return err
			}
			if g.JSON {
				return g.printJSON(struct {
					api.AccountRecord
					Tokens []api.Token `json:"tokens"`
				}{acct, tokens})
			}
			t := newTable(g.stdout)
			t.Row("account", acct.Name)
			t.Row("disk limit", formatLimit(acct.DiskLimit))
			t.Row("created", formatTime(g.now(), acct.CreatedAt))
			t.Row("tokens", fmt.Sprint(len(tokens)))
			if err := t.Flush(); err != nil {
				return err
			}
			return printTokens(g, tokens)
		},
	}

	var setLimit string
	set := &cobra.Command{
		Use:     "set NAME --disk-limit SIZE",
		Short:   "Change an account (admin)",
		Example: "  cairn account set team-a --disk-limit 500G\n  cairn account set team-a --disk-limit 0   # the host's default",
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("disk-limit") {
				return usageErrorf("nothing to change: give --disk-limit")
			}
			acct, err := g.client().SetAccount(cmd.Context(), args[0], api.SetAccountRequest{DiskLimit: &setLimit})
			if err != nil {
				return err
			}
			return printAccountRecord(g, acct, "Account changed: ")
		},
	}
	set.Flags().StringVar(&setLimit, "disk-limit", "", "the disk limit, e.g. 100G; 0: the host's default")

	var delOpts accountDeleteOptions
	del := &cobra.Command{
		Use:   "delete NAME [--force [--yes]]",
		Short: "Delete an account with its tokens (admin); --force: with all it holds",
		Long: `Delete an account and its tokens; its audit entries stay. Without --force it
must hold no sandbox and no checkpoint (A05 otherwise). The default
account cannot be deleted.

With --force everything the account holds goes too, after you type the
account's name to confirm (on a terminal; --yes skips the question, for
scripts; without a terminal and without --yes cairn refuses). Its tokens
are revoked first (their sessions end), then its sandboxes are stopped and
deleted, then its checkpoints and snapshots, with their off-site copies,
and then the account. This cannot be undone. A delete that fails midway
(an off-site location that does not answer: R01) leaves the account with
what it still holds and its tokens revoked: run it again to finish. An
admin token cannot force the delete of its own account.`,
		Example: "  cairn account delete team-a\n  cairn account delete team-a --force\n  cairn account delete team-a --force --yes   # in a script",
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			delOpts.Name = args[0]
			return runAccountDelete(cmd.Context(), g, delOpts)
		},
	}
	del.Flags().BoolVar(&delOpts.Force, "force", false, "delete what the account holds too: sandboxes, checkpoints, snapshots, off-site copies")
	del.Flags().BoolVar(&delOpts.Yes, "yes", false, "with --force: do not ask to type the account's name")
	return []*cobra.Command{create, list, show, set, del}
}

// accountDeleteOptions are the flags of cairn account delete.
type accountDeleteOptions struct {
	Name       string
	Force, Yes bool
}

func runAccountDelete(ctx context.Context, g *globalOptions, opts accountDeleteOptions) error {
	if opts.Yes && !opts.Force {
		return usageErrorf("--yes goes with --force")
	}
	c := g.client()
	if !opts.Force {
		if err := c.DeleteAccount(ctx, opts.Name); err != nil {
			return err
		}
		if g.JSON {
			return g.printJSON(map[string]string{"deleted": opts.Name})
		}
		g.printf("Account deleted: %s\n", opts.Name)
		return nil
	}
	if !opts.Yes {
		if _, ok := g.stdinTerminal(); !ok {
			return usageErrorf("account delete --force asks you to type the account's name, and standard input is not a terminal: give --yes to delete %s and all it holds without asking", opts.Name)
		}
		g.eprintf("This deletes account %s and all it holds: its sandboxes (stopped first), checkpoints,\nsnapshots, tokens and off-site copies. It cannot be undone.\nType the account's name to confirm: ", opts.Name)
		typed, err := readLine(g.stdin)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if typed != opts.Name {
			return fmt.Errorf("account %s not deleted: the name typed (%q) is not the account's", opts.Name, typed)
		}
	}
	op, err := c.PurgeAccount(ctx, opts.Name)
	if err != nil {
		return err
	}
	raw, err := follow(ctx, c, op, "", g)
	if err != nil {
		return err
	}
	var res api.AccountDeleted
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("operation %s: bad result: %w", op.ID, err)
	}
	if g.JSON {
		return g.printJSON(res)
	}
	g.printf("Account deleted: %s (%d sandboxes, %d checkpoints, %d tokens)\n", res.Deleted, res.Sandboxes, res.Checkpoints, res.Tokens)
	return nil
}

// findAccount returns the account called name (A04 if none).
func findAccount(ctx context.Context, g *globalOptions, name string) (api.AccountRecord, error) {
	list, err := g.client().Accounts(ctx)
	if err != nil {
		return api.AccountRecord{}, err
	}
	for _, a := range list {
		if a.Name == name {
			return a, nil
		}
	}
	return api.AccountRecord{}, errdefs.New(api.CodeNoAccount, "no account named %q", name)
}

func formatLimit(b int64) string {
	if b <= 0 {
		return "host default"
	}
	return formatSize(b)
}

func printAccountRecord(g *globalOptions, a api.AccountRecord, prefix string) error {
	if g.JSON {
		return g.printJSON(a)
	}
	g.printf("%s%s (disk limit: %s)\n", prefix, a.Name, formatLimit(a.DiskLimit))
	return nil
}

func newTokenCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Make, list and revoke API tokens (admin)",
		Long: `API tokens let other machines use this cairnd over HTTPS (cairnd --listen):
cairn login https://HOST:PORT with one, or --host and --token. A token
belongs to one account and has a role: read (changes nothing), member
(works in its account), admin (also manages accounts and tokens). Only a
hash of the secret is kept: it is shown once, when made.`,
		Args: groupArgs,
		RunE: showHelp,
	}
	var req api.CreateTokenRequest
	create := &cobra.Command{
		Use:   "create --name NAME [--account A] [--role admin|member|read] [--expires 30d]",
		Short: "Make a token; its secret is shown once",
		Example: `  cairn token create --name laptop
  cairn token create --account team-a --name ci --role member --expires 90d
  cairn token create --account team-a --name dashboard --role read --json | jq -r .token`,
		Args: exactArgs(),
		RunE: func(c *cobra.Command, _ []string) error {
			if req.Name == "" {
				return usageErrorf("token create needs --name")
			}
			tok, err := g.client().CreateToken(c.Context(), req)
			if err != nil {
				return err
			}
			if g.JSON {
				return g.printJSON(tok)
			}
			g.printf("Token created: %s (id %s, account %s, role %s)\n", tok.Info.Name, tok.Info.ID, tok.Info.Account, tok.Info.Role)
			g.printf("%s\n", tok.Token)
			g.eprintf("Keep it now: it is not shown again.\n")
			return nil
		},
	}
	f := create.Flags()
	f.StringVar(&req.Name, "name", "", "the token's name, unique in its account (required)")
	f.StringVar(&req.Account, "account", "", "its account (default: yours)")
	f.StringVar(&req.Role, "role", "member", "admin, member or read")
	f.StringVar(&req.Expires, "expires", "", "lifetime: days (30d) or a duration (12h); default: never")

	var account string
	list := &cobra.Command{
		Use:   "list [--account A]",
		Short: "List tokens: of one account, or of every account",
		Args:  exactArgs(),
		RunE: func(c *cobra.Command, _ []string) error {
			tokens, err := g.client().Tokens(c.Context(), account)
			if err != nil {
				return err
			}
			if g.JSON {
				return g.printJSON(tokens)
			}
			return printTokens(g, tokens)
		},
	}
	list.Flags().StringVar(&account, "account", "", "only this account's")

	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token: its next request is refused, its open sessions end now",
		Long: `Revoke a token: its next request is refused (A01), and what it has open
ends at once: attached exec sessions (their commands are hung up), port
connections and followed event streams. A revoked token stays listed, its
name taken.`,
		Args: exactArgs("ID"),
		RunE: func(c *cobra.Command, args []string) error {
			tok, err := g.client().RevokeToken(c.Context(), args[0])
			if err != nil {
				return err
			}
			if g.JSON {
				return g.printJSON(tok)
			}
			g.printf("Token revoked: %s (%s, account %s)\n", tok.ID, tok.Name, tok.Account)
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

func printTokens(g *globalOptions, tokens []api.Token) error {
	t := newTable(g.stdout, "ID", "ACCOUNT", "NAME", "ROLE", "STATE", "CREATED", "EXPIRES", "LAST USED")
	for _, tok := range tokens {
		expires, used := "never", "never"
		if tok.ExpiresAt != nil {
			expires = formatTime(g.now(), *tok.ExpiresAt)
		}
		if tok.LastUsedAt != nil {
			used = formatAge(g.now(), *tok.LastUsedAt)
		}
		t.Row(tok.ID, tok.Account, tok.Name, tok.Role, tok.State, formatAge(g.now(), tok.CreatedAt), expires, used)
	}
	return t.Flush()
}
