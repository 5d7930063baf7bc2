package daemon

import (
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
// anything.
type remoteTLS struct {
	keyPair     *portproxy.KeyPair
	fingerprint string
	selfSigned  bool
	ln          net.Listener // open once listen was called
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
	fp, err := apitls.FileFingerprint(cert)
	if err != nil {
		return nil, err
	}
	return &remoteTLS{keyPair: kp, fingerprint: fp, selfSigned: self}, nil
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
