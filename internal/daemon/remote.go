package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/cairn-sandbox/cairn/internal/apitls"
	"github.com/cairn-sandbox/cairn/internal/httpedge"
	"github.com/cairn-sandbox/cairn/internal/portproxy"
)

// The API's TCP listener (--listen): HTTPS only, every request with an
// API token (server.RemoteHandler). Its certificate is the operator's
// (--tls-cert, --tls-key) or cairnd's own self-signed one, made on first
// start in DATA-DIR/tls (package apitls).

// remoteTLS is the listener's certificate, checked before cairnd makes
// anything. The files are read again when they change (package
// portproxy's KeyPair): fingerprint is always the one served now.
type remoteTLS struct {
	keyPair    *portproxy.KeyPair
	selfSigned bool
	// dir and names make the self-signed certificate again (renew).
	dir   string
	names []string
	ln    net.Listener // open once listen was called
}

// fingerprint is the fingerprint of the certificate the listener serves
// now, the files looked at again first: what `cairn server info` shows.
func (t *remoteTLS) fingerprint() string {
	return apitls.Fingerprint(t.keyPair.Current().Certificate[0])
}

// loadRemoteTLS returns the TCP listener's certificate; nil when there
// is no listener.
func loadRemoteTLS(cfg Config) (*remoteTLS, error) {
	if cfg.Listen == "" {
		if cfg.TLSCert != "" || cfg.TLSKey != "" {
			return nil, errors.New("--tls-cert and --tls-key are for --listen: give it too")
		}
		return nil, nil
	}
	host, _, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("--listen %q: %w (want ADDR:PORT, e.g. 0.0.0.0:7443)", cfg.Listen, err)
	}
	cert, key, self := cfg.TLSCert, cfg.TLSKey, false
	switch {
	case cert == "" && key == "":
		var made bool
		cert, key, made, err = apitls.SelfSigned(filepath.Join(cfg.DataDir, "tls"), []string{host}, time.Now())
		if err != nil {
			return nil, fmt.Errorf("the API's self-signed certificate: %w", err)
		}
		self = true
		if made {
			slog.Info("made a self-signed certificate for the API listener", "cert", cert)
		}
	case cert == "" || key == "":
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	kp, err := portproxy.LoadKeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("the API listener's certificate: %w", err)
	}
	kp.OnRenew(func(c *tls.Certificate) {
		slog.Info("API listener: a renewed certificate is served", "cert", cert, "tls_fingerprint", apitls.Fingerprint(c.Certificate[0]))
	})
	t := &remoteTLS{keyPair: kp, selfSigned: self}
	if self {
		t.dir, t.names = filepath.Join(cfg.DataDir, "tls"), []string{host}
	}
	return t, nil
}

// renewEvery is how often cairnd looks whether its own certificate is
// near its end.
const renewEvery = 24 * time.Hour

// keepRenewed makes cairnd's own certificate again when it nears its end
// (apitls.RenewBefore), until ctx ends; the listener serves the new one
// at once. The operator's certificate is the operator's to renew.
func (t *remoteTLS) keepRenewed(ctx context.Context) {
	if !t.selfSigned {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(renewEvery):
		}
		if _, _, made, err := apitls.SelfSigned(t.dir, t.names, time.Now()); err != nil {
			slog.Warn("API listener: renewing the self-signed certificate", "err", err)
		} else if made {
			t.keyPair.Current() // read now: logged with its fingerprint (OnRenew)
		}
	}
}

// remoteLimits are the TCP listener's: its clients are other machines.
func remoteLimits() httpedge.Limits {
	lim := httpedge.Host("api listener")
	lim.MaxConns = 1024
	return lim
}

// listen opens the TCP listener (--listen); its address is then known
// (a port 0 chosen).
func (t *remoteTLS) listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", addr, err)
	}
	t.ln = ln
	return nil
}

// serve serves h on the listener over TLS until the server is shut down.
func (t *remoteTLS) serve(h http.Handler) *http.Server {
	lim := remoteLimits()
	srv := httpedge.NewServer(h, lim)
	l := tls.NewListener(httpedge.Listen(t.ln, lim), t.keyPair.TLSConfig())
	go func() {
		if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			slog.Error("API listener stopped", "err", err)
		}
	}()
	return srv
}
