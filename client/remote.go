package client

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Remote says how to reach a cairnd over its TCP listener.
type Remote struct {
	// URL is the server: "https://HOST:PORT".
	URL string
	// Token is the API token every request carries.
	Token string
	// Fingerprint pins the server's certificate: "sha256:" and the hex
	// SHA-256 of its DER form (what `cairn server info` shows). With a
	// pin, the certificate need not be signed by anyone (cairnd's own
	// self-signed one); without, it must verify against the system's
	// roots for the URL's host.
	Fingerprint string
	// Seen, if set, is told the fingerprint of the certificate the
	// server showed, before the pin is checked (cairn login's trust on
	// first use).
	Seen func(fingerprint string)
}

// ErrFingerprint is the server showing a certificate other than the one
// pinned.
var ErrFingerprint = errors.New("the server's certificate is not the one pinned")

// Fingerprint is the fingerprint of a certificate in DER form, as Remote
// pins it.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// NewRemote returns a client for the cairnd at r.URL.
func NewRemote(r Remote) (*Client, error) {
	u, err := url.Parse(r.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, fmt.Errorf("cairnd's address %q is not https://HOST:PORT", r.URL)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "443")
	}
	cfg := &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}
	pin := strings.ToLower(r.Fingerprint)
	if pin != "" || r.Seen != nil {
		// The pin replaces the chain's verification: cairnd's
		// certificate is its own (self-signed) unless it was given one.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the server showed no certificate")
			}
			got := Fingerprint(cs.PeerCertificates[0].Raw)
			if r.Seen != nil {
				r.Seen(got)
			}
			if pin == "" {
				return verifyChain(cs, u.Hostname())
			}
			if got != pin {
				return fmt.Errorf("%w: it shows %s, pinned is %s", ErrFingerprint, got, pin)
			}
			return nil
		}
	}
	dial := func(ctx context.Context) (net.Conn, error) {
		d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: cfg}
		return d.DialContext(ctx, "tcp", host)
	}
	tr := &http.Transport{
		DialTLSContext:      func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		TLSHandshakeTimeout: 10 * time.Second,
		ForceAttemptHTTP2:   false,
		Proxy:               nil,
	}
	return &Client{where: r.URL, base: "https://" + host, token: r.Token, http: &http.Client{Transport: tr}, dial: dial}, nil
}

// NewHTTP returns a client for the cairnd at base (https://HOST:PORT)
// that sends its requests through hc as they are: what they carry to
// prove who sends them is hc's to add (one host calling another; see
// docs/several-hosts.md).
func NewHTTP(base string, hc *http.Client) *Client {
	return &Client{where: base, base: strings.TrimSuffix(base, "/"), http: hc}
}

// verifyChain checks the server's chain against the system's roots.
func verifyChain(cs tls.ConnectionState, host string) error {
	opts := x509.VerifyOptions{DNSName: host, Intermediates: x509.NewCertPool()}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(opts)
	return err
}

// authorize adds the client's token to req.
func (c *Client) authorize(req *http.Request) {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
}

// unreachable is the error of a connection to cairnd that failed.
func (c *Client) unreachable(err error) error {
	if c.token != "" || strings.HasPrefix(c.base, "https://") {
		if errors.Is(err, ErrFingerprint) {
			return fmt.Errorf("cairnd at %s: %w (if its certificate was replaced on purpose, check the new fingerprint with `cairn server info` on the host, then `cairn login %s --fingerprint NEW`)", c.where, err, c.where)
		}
		return fmt.Errorf("cannot reach cairnd at %s: %w", c.where, err)
	}
	return fmt.Errorf("cannot reach cairnd at %s (is it running? start it with `make run`, or set --socket / CAIRN_SOCKET): %w", c.where, err)
}
