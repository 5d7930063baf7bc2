package cli

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

func newPortCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "port",
		Short: "Publish ports of sandboxes, and forward them",
		Long: `A published port is reachable through cairnd's port proxy by HTTP and
WebSocket, at two URLs (see docs/ports.md):

  http://PORT-NAME.DOMAIN:PROXYPORT/                 by host name
  http://DOMAIN:PROXYPORT/sandboxes/NAME/ports/PORT/  by path, without wildcard DNS

(https:// and wss:// when cairnd has a certificate: --proxy-tls-cert.)
A private port (the default) needs the account's port token ("cairn port
token"); a public one is open to anyone who reaches the proxy. "cairn port
forward" carries raw TCP to this machine instead, for any port.`,
		Example: `  cairn port publish web 8080
  cairn port forward db 5432 --local 15432`,
		Args: groupArgs,
		RunE: showHelp,
	}
	cmd.AddCommand(newPortPublishCommand(g), newPortListCommand(g), newPortUnpublishCommand(g),
		newPortForwardCommand(g), newPortTokenCommand(g))
	return cmd
}

// portArg reads a port number argument, 1 to 65535 (V02, a usage error).
func portArg(what, s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < api.MinPort || n > api.MaxPort {
		return 0, usageError{errdefs.New(api.CodeInvalidArgument, "invalid %s %q: want a number from %d to %d", what, s, api.MinPort, api.MaxPort)}
	}
	return n, nil
}

func access(public bool) string {
	if public {
		return "public"
	}
	return "private"
}

// portPublishOptions are the arguments and flags of cairn port publish.
type portPublishOptions struct {
	Name   string
	Port   int
	Public bool
}

func newPortPublishCommand(g *globalOptions) *cobra.Command {
	var opts portPublishOptions
	cmd := &cobra.Command{
		Use:   "publish NAME PORT [--public]",
		Short: "Publish a port of a sandbox through cairnd's proxy",
		Long: `Publish TCP port PORT (1-65535) inside sandbox NAME through cairnd's port
proxy, and print its two URLs. The port is private unless --public: a
private port needs the account's port token ("cairn port token"), as
"Authorization: Bearer TOKEN" or opened once in a browser with
?cairn_token=TOKEN. Publishing a port again sets whether it is public.

The sandbox need not be running; the port answers once a server listens
on it inside. Forks and restores as new sandboxes get the ports of their
source. --json prints the port.`,
		Example: `  cairn port publish web 8080
  cairn port publish web 3000 --public`,
		Args: exactArgs("NAME", "PORT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			var err error
			if opts.Port, err = portArg("port", args[1]); err != nil {
				return err
			}
			return runPortPublish(cmd.Context(), opts, g)
		},
	}
	cmd.Flags().BoolVar(&opts.Public, "public", false, "reachable without the port token (set --public=false to make it private again)")
	return cmd
}

func runPortPublish(ctx context.Context, opts portPublishOptions, g *globalOptions) error {
	p, err := g.client().PublishPort(ctx, opts.Name, api.PublishPortRequest{Port: opts.Port, Public: opts.Public})
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(p)
	}
	g.printf("Port %d of %s is published (%s):\n  %s\n  %s\n", p.Port, opts.Name, access(p.Public), p.URL, p.PathURL)
	if !p.Public {
		g.printf("It needs the port token: `cairn port token`.\n")
	}
	return nil
}

// portListOptions are the arguments of cairn port list.
type portListOptions struct{ Name string }

func newPortListCommand(g *globalOptions) *cobra.Command {
	var opts portListOptions
	return &cobra.Command{
		Use:     "list NAME",
		Aliases: []string{"ls"},
		Short:   "List the published ports of a sandbox",
		Long:    `List the ports sandbox NAME publishes, whether each is public or private, and their URLs.`,
		Example: `  cairn port list web
  cairn port list web --json`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			return runPortList(cmd.Context(), opts, g)
		},
	}
}

func runPortList(ctx context.Context, opts portListOptions, g *globalOptions) error {
	ports, err := g.client().Ports(ctx, opts.Name)
	if err != nil {
		return err
	}
	if g.JSON {
		if ports == nil {
			ports = []api.Port{}
		}
		return g.printJSON(ports)
	}
	if len(ports) == 0 {
		g.printf("Sandbox %s publishes no ports: `cairn port publish %s PORT`.\n", opts.Name, opts.Name)
		return nil
	}
	t := newTable(g.stdout, "PORT", "ACCESS", "URL", "PATH URL")
	for _, p := range ports {
		t.Row(strconv.Itoa(p.Port), access(p.Public), p.URL, p.PathURL)
	}
	return t.Flush()
}

// portUnpublishOptions are the arguments of cairn port unpublish.
type portUnpublishOptions struct {
	Name string
	Port int
}

func newPortUnpublishCommand(g *globalOptions) *cobra.Command {
	var opts portUnpublishOptions
	return &cobra.Command{
		Use:   "unpublish NAME PORT",
		Short: "Stop publishing a port of a sandbox",
		Long: `Stop publishing PORT of sandbox NAME: its URLs answer P01 from then on
(connections already open through the proxy go on until they close).`,
		Example: `  cairn port unpublish web 8080`,
		Args:    exactArgs("NAME", "PORT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			var err error
			if opts.Port, err = portArg("port", args[1]); err != nil {
				return err
			}
			return runPortUnpublish(cmd.Context(), opts, g)
		},
	}
}

func runPortUnpublish(ctx context.Context, opts portUnpublishOptions, g *globalOptions) error {
	if err := g.client().UnpublishPort(ctx, opts.Name, opts.Port); err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(map[string]any{"sandbox": opts.Name, "unpublished": opts.Port})
	}
	g.printf("Port %d of %s is no longer published\n", opts.Port, opts.Name)
	return nil
}

// portTokenOptions are the flags of cairn port token.
type portTokenOptions struct{ Rotate bool }

func newPortTokenCommand(g *globalOptions) *cobra.Command {
	var opts portTokenOptions
	cmd := &cobra.Command{
		Use:   "token [--rotate]",
		Short: "Show the token that opens the account's private ports",
		Long: `Print the account's port token, made the first time it is asked for. A
request to a private port carries it as "Authorization: Bearer TOKEN", or
a browser opens the port's URL once with ?cairn_token=TOKEN (the proxy then
keeps it in a cookie for that port).

--rotate replaces it with a new one at once: the old token, and every
cookie holding it, is refused from then on. --json prints {"token": …}.`,
		Example: `  curl -H "Authorization: Bearer $(cairn port token)" http://8080-web.localhost:8800/
  cairn port token --rotate`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPortToken(cmd.Context(), opts, g)
		},
	}
	cmd.Flags().BoolVar(&opts.Rotate, "rotate", false, "replace the token with a new one at once")
	return cmd
}

func runPortToken(ctx context.Context, opts portTokenOptions, g *globalOptions) error {
	tok, err := g.client().PortToken(ctx, opts.Rotate)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(tok)
	}
	g.printf("%s\n", tok.Token)
	if opts.Rotate {
		g.eprintf("The port token was replaced: the old one no longer opens private ports.\n")
	}
	return nil
}

// portForwardOptions are the arguments and flags of cairn port forward.
type portForwardOptions struct {
	Name  string
	Port  int
	Local int // 0: any free port
}

func newPortForwardCommand(g *globalOptions) *cobra.Command {
	var opts portForwardOptions
	var local string
	cmd := &cobra.Command{
		Use:   "forward NAME PORT [--local LOCALPORT]",
		Short: "Forward a port of a sandbox to this machine",
		Long: `Listen on 127.0.0.1:LOCALPORT (by default the same number as PORT; 0 for
any free port) and carry each connection to TCP port PORT inside sandbox
NAME, through cairnd's socket: raw TCP, for any protocol (a database, SSH),
published or not. It prints where it listens and runs until Ctrl-C, which
ends it with exit code 0 and closes the connections.

A connection cairnd cannot carry (the sandbox is not running, nothing
listens on the port) is closed at once, and the reason is printed.`,
		Example: `  cairn port forward db 5432 --local 15432
  psql -h 127.0.0.1 -p 15432`,
		Args: exactArgs("NAME", "PORT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			var err error
			if opts.Port, err = portArg("port", args[1]); err != nil {
				return err
			}
			opts.Local = opts.Port
			if cmd.Flags().Changed("local") {
				if local == "0" {
					opts.Local = 0
				} else if opts.Local, err = portArg("--local", local); err != nil {
					return err
				}
			}
			return runPortForward(cmd.Context(), opts, g)
		},
	}
	cmd.Flags().StringVar(&local, "local", "", "port to listen on at 127.0.0.1 (default: PORT; 0: any free one)")
	return cmd
}

func runPortForward(ctx context.Context, opts portForwardOptions, g *globalOptions) error {
	c := g.client()
	// Fail early on a sandbox that does not exist.
	if _, err := c.Sandbox(ctx, opts.Name); err != nil {
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(opts.Local)))
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return usageError{errdefs.New(api.CodeInvalidArgument, "local port %d is taken on this machine: give another with --local, or --local 0 for any free one", opts.Local)}
	case errors.Is(err, syscall.EACCES):
		return usageError{errdefs.New(api.CodeInvalidArgument, "local port %d is privileged (below 1024) and needs root here: give another with --local", opts.Local)}
	case err != nil:
		return err
	}
	defer ln.Close()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	if g.JSON {
		if err := g.printJSON(map[string]any{"sandbox": opts.Name, "port": opts.Port, "local": ln.Addr().String()}); err != nil {
			return err
		}
	} else {
		g.printf("Forwarding %s to port %d of %s; Ctrl-C to stop\n", ln.Addr(), opts.Port, opts.Name)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		local, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil // Ctrl-C: the normal end
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			forwardConn(ctx, g, opts, local.(*net.TCPConn))
		}()
	}
}

// forwardConn carries one local connection to the sandbox's port.
func forwardConn(ctx context.Context, g *globalOptions, opts portForwardOptions, local *net.TCPConn) {
	defer local.Close()
	remote, err := g.client().ConnectPort(ctx, opts.Name, opts.Port)
	if err != nil {
		if ctx.Err() == nil {
			g.eprintf("%s\n", formatError(err))
		}
		return
	}
	defer remote.Close()
	stop := context.AfterFunc(ctx, func() { local.Close(); remote.Close() })
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(remote, local)
		remote.CloseWrite()
	}()
	if _, err := io.Copy(local, remote); err != nil && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
		g.eprintf("%s\n", formatError(err))
	}
	// The port's side ended: nothing more comes, and cairnd closed the
	// connection whole.
	local.Close()
	remote.Close()
	<-done
}
