package portproxy

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// KeyPair serves the proxy's TLS certificate from a certificate file and
// a key file (PEM), read again when either changes on disk: a renewed
// certificate (an ACME client's, a wildcard for *.DOMAIN) is picked up by
// the next handshake without restarting cairnd. A renewal that cannot be
// read keeps the last good pair in use and is logged.
type KeyPair struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   [2]time.Time // modification times the cert was loaded at
	checked time.Time
	renewed func(*tls.Certificate) // nil: nobody is told
}

// keyPairRecheck is how often at most the files are looked at again.
const keyPairRecheck = 10 * time.Second

// LoadKeyPair reads certFile and keyFile, or returns an error saying
// which is wrong.
func LoadKeyPair(certFile, keyFile string) (*KeyPair, error) {
	if certFile == "" || keyFile == "" {
		return nil, fmt.Errorf("the port proxy's TLS needs both a certificate file and a key file")
	}
	k := &KeyPair{certFile: certFile, keyFile: keyFile}
	if err := k.load(); err != nil {
		return nil, err
	}
	return k, nil
}

func (k *KeyPair) load() error {
	var stamp [2]time.Time
	for i, f := range []string{k.certFile, k.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return fmt.Errorf("port proxy TLS: %w", err)
		}
		stamp[i] = fi.ModTime()
	}
	if k.cert != nil && stamp == k.stamp {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		return fmt.Errorf("port proxy TLS: certificate %s with key %s: %w", k.certFile, k.keyFile, err)
	}
	k.cert, k.stamp = &cert, stamp
	return nil
}

// GetCertificate is for tls.Config.GetCertificate.
func (k *KeyPair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return k.get(false), nil
}

// Current returns the certificate GetCertificate serves, after looking at
// the files again at once: a renewal on disk is what it returns, and
// what the next handshake serves.
func (k *KeyPair) Current() *tls.Certificate { return k.get(true) }

// OnRenew has fn called with each certificate read again from renewed
// files (not the first): a log line with its fingerprint. fn must not
// call k.
func (k *KeyPair) OnRenew(fn func(*tls.Certificate)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.renewed = fn
}

// get returns the certificate in use, first reading the files again if
// they were last looked at keyPairRecheck ago, or now.
func (k *KeyPair) get(now bool) *tls.Certificate {
	k.mu.Lock()
	defer k.mu.Unlock()
	if t := time.Now(); now || t.Sub(k.checked) >= keyPairRecheck {
		k.checked = t
		old := k.cert
		if err := k.load(); err != nil {
			slog.Warn("TLS: keeping the certificate in use", "cert", k.certFile, "err", err)
		} else if k.cert != old && k.renewed != nil {
			k.renewed(k.cert)
		}
	}
	return k.cert
}

// TLSConfig is the proxy listener's TLS configuration over k. It speaks
// HTTP/1.1 only: WebSocket upgrades need it, and the servers inside get
// HTTP/1.1 whatever the client spoke.
func (k *KeyPair) TLSConfig() *tls.Config {
	return &tls.Config{
		GetCertificate: k.GetCertificate,
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"http/1.1"},
	}
}
