package apitls

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
	"time"
)

// The certificate is made once, kept (0600), loads as a pair, names the
// loopback addresses and the listener's, and its fingerprint is stable.
func TestSelfSignedMadeOnceAndKept(t *testing.T) {
	dir := t.TempDir()
	cert, key, made, err := SelfSigned(dir, []string{"10.1.2.3", "cairn.example"}, time.Now())
	if err != nil || !made {
		t.Fatalf("first: made %v, %v", made, err)
	}
	fp, err := FileFingerprint(cert)
	if err != nil {
		t.Fatal(err)
	}
	_, _, made, err = SelfSigned(dir, nil, time.Now())
	if err != nil || made {
		t.Fatalf("second: made %v, %v", made, err)
	}
	if again, _ := FileFingerprint(cert); again != fp {
		t.Fatalf("fingerprint changed: %s, %s", fp, again)
	}
	for _, f := range []string{cert, key} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v", f, fi.Mode(), err)
		}
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if Fingerprint(c.Raw) != fp {
		t.Error("FileFingerprint is not the certificate's")
	}
	for _, h := range []string{"127.0.0.1", "::1", "localhost", "10.1.2.3", "cairn.example"} {
		if err := c.VerifyHostname(h); err != nil {
			t.Errorf("not for %s: %v", h, err)
		}
	}
}
