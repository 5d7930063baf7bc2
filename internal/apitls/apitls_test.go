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

// A certificate with less than RenewBefore left is made again (another
// fingerprint); one with more is kept.
func TestSelfSignedRenewedNearItsEnd(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	cert, _, _, err := SelfSigned(dir, nil, start)
	if err != nil {
		t.Fatal(err)
	}
	fp, _ := FileFingerprint(cert)
	if _, _, made, err := SelfSigned(dir, nil, start.AddDate(9, 0, 0)); err != nil || made {
		t.Fatalf("a year before its end: made %v, %v", made, err)
	}
	near := start.AddDate(10, 0, 0).Add(-RenewBefore + time.Hour)
	if _, _, made, err := SelfSigned(dir, nil, near); err != nil || !made {
		t.Fatalf("within RenewBefore of its end: made %v, %v", made, err)
	}
	if again, _ := FileFingerprint(cert); again == fp {
		t.Error("the renewed certificate has the old fingerprint")
	}
	if end, err := notAfter(cert); err != nil || !end.After(near.AddDate(9, 0, 0)) {
		t.Errorf("the renewed certificate ends %v (%v)", end, err)
	}
}
