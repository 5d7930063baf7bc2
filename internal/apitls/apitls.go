// Package apitls gives cairnd's TCP listener its TLS certificate: the
// operator's (--tls-cert and --tls-key, read again when renewed), or one
// cairnd makes for itself on its first start and keeps in its data dir
// (DATA-DIR/tls/cert.pem and key.pem, 0600): ECDSA P-256, valid ten
// years, for localhost, the loopback addresses, the host's name and the
// listener's address, made again when less than RenewBefore of it is
// left. Clients trust a self-signed certificate by its fingerprint
// ("sha256:" and the hex SHA-256 of its DER form), which cairnd logs and
// `cairn server info` shows; `cairn login` pins it.
package apitls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-sandbox/cairn/client"
)

// Fingerprint is how clients pin a certificate (its DER form): the
// client's own definition.
var Fingerprint = client.Fingerprint

// FileFingerprint is the fingerprint of the first certificate in the PEM
// file path.
func FileFingerprint(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return "", fmt.Errorf("%s holds no PEM certificate", path)
		}
		if blk.Type == "CERTIFICATE" {
			return Fingerprint(blk.Bytes), nil
		}
	}
}

// RenewBefore is how long before its end cairnd's own certificate is
// made again.
const RenewBefore = 30 * 24 * time.Hour

// notAfter is when the first certificate in the PEM file path ends.
func notAfter(path string) (time.Time, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, err
	}
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			return time.Time{}, fmt.Errorf("%s holds no PEM certificate", path)
		}
		if blk.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				return time.Time{}, err
			}
			return c.NotAfter, nil
		}
	}
}

// SelfSigned returns the certificate and key files of cairnd's own
// certificate in dir, making them first if they are not there or the
// certificate ends within RenewBefore of now (made reports it). names are
// the DNS names and IP addresses it is for, beside localhost and the
// loopback addresses.
func SelfSigned(dir string, names []string, now time.Time) (certFile, keyFile string, made bool, err error) {
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	_, cerr := os.Stat(certFile)
	_, kerr := os.Stat(keyFile)
	if cerr == nil && kerr == nil {
		if end, err := notAfter(certFile); err != nil || now.Add(RenewBefore).Before(end) {
			// One that cannot be read is left for the key pair's load to
			// report.
			return certFile, keyFile, false, nil
		}
	}
	if !errors.Is(cerr, os.ErrNotExist) && cerr != nil {
		return "", "", false, cerr
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", false, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", false, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return "", "", false, err
	}
	host, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "cairnd " + host, Organization: []string{"cairn"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	for _, n := range append([]string{host}, names...) {
		if n == "" {
			continue
		}
		if ip := net.ParseIP(n); ip != nil {
			if !ip.IsUnspecified() {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			}
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", false, err
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", false, err
	}
	// The key first: a cert without its key is not taken as a pair.
	if err := writeFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})); err != nil {
		return "", "", false, err
	}
	if err := writeFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})); err != nil {
		return "", "", false, err
	}
	return certFile, keyFile, true, nil
}

// writeFile writes b to path through a temporary file, synced, renamed.
func writeFile(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
