package daemon

import (
	"crypto/tls"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/apitls"
	"github.com/cairn-sandbox/cairn/internal/testenv/testcert"
)

// The listener's fingerprint is the one of the certificate it serves
// now: when the --tls-cert and --tls-key files are replaced, it follows
// at once, and the next handshake serves the new certificate.
func TestRemoteFingerprintFollowsRenewal(t *testing.T) {
	dir := t.TempDir()
	pair := testcert.Write(t, dir, "first", "localhost")
	rt, err := loadRemoteTLS(Config{Listen: "127.0.0.1:0", TLSCert: pair.CertFile, TLSKey: pair.KeyFile, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	srv := rt.serve(http.NotFoundHandler())
	defer srv.Close()
	served := func() string {
		t.Helper()
		c, err := tls.Dial("tcp", rt.ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return apitls.Fingerprint(c.ConnectionState().PeerCertificates[0].Raw)
	}
	first := apitls.Fingerprint(pair.Cert.Raw)
	if got := rt.fingerprint(); got != first || served() != first {
		t.Fatalf("fingerprint %s, served %s, want %s", got, served(), first)
	}
	renewed := testcert.Write(t, dir, "second", "localhost")
	later := time.Now().Add(time.Minute)
	for _, f := range []string{renewed.CertFile, renewed.KeyFile} {
		os.Chtimes(f, later, later)
	}
	second := apitls.Fingerprint(renewed.Cert.Raw)
	if got := rt.fingerprint(); got != second {
		t.Errorf("after the files were replaced: fingerprint %s, want the new %s", got, second)
	}
	if got := served(); got != second {
		t.Errorf("after the files were replaced: serves %s, want the new %s", got, second)
	}
}
