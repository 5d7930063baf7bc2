// Package portproxy publishes TCP ports inside sandboxes: which ports a
// sandbox publishes, public or private (kept in the metadata store), the
// credentials that open the private ones, and an HTTP proxy that forwards
// requests, WebSocket connections included, to a port inside.
//
// The proxy (Proxy, an http.Handler cairnd serves on --proxy-listen, by
// HTTPS when it is given a certificate: KeyPair) finds its target in the
// request:
//
//	http://8080-web.localhost:8800/app/      host form: PORT-NAME.DOMAIN
//	http://localhost:8800/sandboxes/web/ports/8080/app/   path form
//
// The path form's prefix is cut before forwarding (the server inside sees
// /app/). A public port is open to anyone who reaches the proxy; a private
// one needs a credential the Credentials accept (today the account's port
// token: PortTokens). A request without one is answered 401 whether or not
// the sandbox and port exist, so that names cannot be probed.
//
// The Service is the API's side (server.Ports): publish, unpublish, list,
// the port token, and raw TCP connections for `cairn port forward`.
//
// How a connection reaches a port inside a sandbox is not this package's
// business: a Dialer does it (cairnd's network package).
package portproxy

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Dialer is what the proxy needs to reach a port inside a sandbox.
type Dialer interface {
	// DialSandbox connects to TCP port inside the running sandbox with id
	// sandboxID. An error that carries an API code (package errdefs; S04
	// or S10 for a sandbox that is not up) is answered with it; any other
	// is answered P04 (nothing answered on the port).
	DialSandbox(ctx context.Context, sandboxID string, port int) (net.Conn, error)
}

// Unwired is a Dialer for a cairnd whose sandboxes have no network the
// proxy can reach: every dial fails.
type Unwired struct{}

// DialSandbox implements Dialer.
func (Unwired) DialSandbox(context.Context, string, int) (net.Conn, error) {
	return nil, errors.New("networking not wired")
}

// Defaults of Config.
const (
	DefaultDomain = "localhost" // *.localhost resolves to this host
	DefaultListen = "127.0.0.1:8800"
)

// Config is what a Service and its Proxy work with.
type Config struct {
	Store  metadata.Store
	Dialer Dialer
	// Domain is the proxy's domain: a port is reached as
	// PORT-NAME.Domain; default DefaultDomain. Lower-case letters, digits,
	// dashes and dots.
	Domain string
	// Addr is the address the proxy listens on (host:port), whose port
	// the URLs carry; default DefaultListen.
	Addr string
	// Account is the account whose sandboxes the proxy's URLs name;
	// default metadata.DefaultAccount. (URLs carry no account yet: cairnd
	// has one. Accounts with API tokens, issue 18, will add it.)
	Account string
	// Credentials open private ports; default PortTokens over Store.
	Credentials Credentials
	// TLS says the proxy serves HTTPS (cairnd's --proxy-tls-cert): the
	// URLs are https://, and 443 is the port they leave out.
	TLS bool
}

// Service publishes ports and answers for them (server.Ports).
type Service struct {
	cfg    Config
	tokens *PortTokens
	scheme string // http or https
	port   string // of Addr; "" when it is the scheme's default
}

// New returns a service over cfg, or an error if cfg.Domain or cfg.Addr
// is malformed.
func New(cfg Config) (*Service, error) {
	if cfg.Domain == "" {
		cfg.Domain = DefaultDomain
	}
	cfg.Domain = strings.ToLower(strings.TrimSuffix(cfg.Domain, "."))
	if _, err := parseHostname(cfg.Domain); err != nil {
		return nil, fmt.Errorf("port proxy domain %q: %w", cfg.Domain, err)
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultListen
	}
	_, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("port proxy address %q: %w", cfg.Addr, err)
	}
	if cfg.Account == "" {
		cfg.Account = metadata.DefaultAccount
	}
	s := &Service{cfg: cfg, tokens: NewPortTokens(cfg.Store)}
	if cfg.Credentials == nil {
		s.cfg.Credentials = s.tokens
	}
	s.scheme, s.port = "http", ":"+port
	if cfg.TLS {
		s.scheme = "https"
	}
	if (!cfg.TLS && port == "80") || (cfg.TLS && port == "443") {
		s.port = ""
	}
	return s, nil
}

// URLs returns the URLs of port of sandbox name: by host name and by path.
func (s *Service) URLs(name string, port int) (host, path string) {
	return fmt.Sprintf("%s://%d-%s.%s%s/", s.scheme, port, name, s.cfg.Domain, s.port),
		fmt.Sprintf("%s://%s%s%s/", s.scheme, s.cfg.Domain, s.port, pathPrefix(name, port))
}

// pathPrefix is the path form's prefix of port of sandbox name.
func pathPrefix(name string, port int) string {
	return "/sandboxes/" + name + "/ports/" + strconv.Itoa(port)
}

// lookup returns the account and sandbox called name in it: S01 if there
// is none (an account that does not exist has no sandboxes).
func lookup(ctx context.Context, store metadata.Store, account, name string) (metadata.Account, metadata.Sandbox, error) {
	acct, err := store.AccountByName(ctx, account)
	if errors.Is(err, metadata.ErrNotFound) {
		return acct, metadata.Sandbox{}, errdefs.New(api.CodeNoSandbox, "no sandbox named %q", name)
	} else if err != nil {
		return acct, metadata.Sandbox{}, err
	}
	sb, err := store.SandboxByName(ctx, acct.ID, name)
	if errors.Is(err, metadata.ErrNotFound) {
		return acct, sb, errdefs.New(api.CodeNoSandbox, "no sandbox named %q", name)
	}
	return acct, sb, err
}

func checkPort(port int) error {
	if metadata.ValidatePort(port) != nil {
		return errdefs.New(api.CodeInvalidArgument, "invalid port %d: want a number from %d to %d", port, api.MinPort, api.MaxPort)
	}
	return nil
}

func (s *Service) apiPort(name string, p metadata.PublishedPort) api.Port {
	host, path := s.URLs(name, p.Port)
	return api.Port{Port: p.Port, Public: p.Public, URL: host, PathURL: path, CreatedAt: p.CreatedAt}
}

// Ports lists the sandbox's published ports. S01.
func (s *Service) Ports(ctx context.Context, account, name string) ([]api.Port, error) {
	_, sb, err := lookup(ctx, s.cfg.Store, account, name)
	if err != nil {
		return nil, err
	}
	ps, err := s.cfg.Store.Ports(ctx, sb.ID)
	if err != nil {
		return nil, err
	}
	out := make([]api.Port, 0, len(ps))
	for _, p := range ps {
		out = append(out, s.apiPort(name, p))
	}
	return out, nil
}

// Publish publishes req.Port, or sets whether it is public. S01, V02.
func (s *Service) Publish(ctx context.Context, account, name string, req api.PublishPortRequest) (api.Port, error) {
	if err := checkPort(req.Port); err != nil {
		return api.Port{}, err
	}
	_, sb, err := lookup(ctx, s.cfg.Store, account, name)
	if err != nil {
		return api.Port{}, err
	}
	p, err := s.cfg.Store.PublishPort(ctx, metadata.PublishedPort{SandboxID: sb.ID, Port: req.Port, Public: req.Public})
	if errors.Is(err, metadata.ErrNotFound) {
		return api.Port{}, errdefs.Wrap(api.CodeNoSandbox, err, "no sandbox named %q", name)
	} else if err != nil {
		return api.Port{}, err
	}
	return s.apiPort(name, p), nil
}

// Unpublish unpublishes port. S01, V02, P01.
func (s *Service) Unpublish(ctx context.Context, account, name string, port int) error {
	if err := checkPort(port); err != nil {
		return err
	}
	_, sb, err := lookup(ctx, s.cfg.Store, account, name)
	if err != nil {
		return err
	}
	err = s.cfg.Store.UnpublishPort(ctx, sb.ID, port)
	if errors.Is(err, metadata.ErrNotFound) {
		return errdefs.New(api.CodePortNotPublished, "sandbox %s has not published port %d", name, port)
	}
	return err
}

// Token returns the account's port token, made on first need; with
// rotate, a new one that replaces it at once.
func (s *Service) Token(ctx context.Context, account string, rotate bool) (api.PortToken, error) {
	acct, err := s.cfg.Store.AccountByName(ctx, account)
	if err != nil {
		return api.PortToken{}, err
	}
	var tok string
	if rotate {
		tok, err = s.tokens.Rotate(ctx, acct)
	} else {
		tok, err = s.tokens.Token(ctx, acct)
	}
	return api.PortToken{Token: tok}, err
}

// Connect opens a TCP connection to port inside the running sandbox,
// published or not. S01, V02, P03, P04 (or the Dialer's code).
func (s *Service) Connect(ctx context.Context, account, name string, port int) (net.Conn, error) {
	if err := checkPort(port); err != nil {
		return nil, err
	}
	_, sb, err := lookup(ctx, s.cfg.Store, account, name)
	if err != nil {
		return nil, err
	}
	if sb.State != metadata.SandboxRunning && !sb.Settings.Asleep { // one asleep wakes as it is dialed
		return nil, notRunning(sb)
	}
	c, err := s.cfg.Dialer.DialSandbox(ctx, sb.ID, port)
	if err != nil {
		return nil, dialError(err, name, port)
	}
	return c, nil
}

func notRunning(sb metadata.Sandbox) error {
	return errdefs.New(api.CodePortNotRunning, "sandbox %s is not running (%s): `cairn start %s`", sb.Name, sb.State, sb.Name)
}

// dialError gives an error of the Dialer its API code: its own, or P04.
func dialError(err error, name string, port int) error {
	var coded *errdefs.Error
	if errors.As(err, &coded) {
		return err
	}
	return errdefs.Wrap(api.CodePortUnreachable, err, "nothing answered on port %d of sandbox %s", port, name)
}

// newToken returns a new port token: 32 random bytes, base64url.
func newToken() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand panics instead)
	return base64.RawURLEncoding.EncodeToString(b)
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
