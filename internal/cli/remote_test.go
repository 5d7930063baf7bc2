package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
)

// cairn login with the token on a pipe: its first line is the token, the
// next answers the trust question (nothing past a line is consumed), and
// the config file holds the token and the certificate's fingerprint.
func TestLoginReadsTheTokenFromAPipe(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("CAIRN_TOKEN", "")
	var mu sync.Mutex
	var bearer string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, api.ServerInfo{Version: "test"}) })
	mux.HandleFunc("GET /v1/whoami", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		bearer = r.Header.Get("Authorization")
		mu.Unlock()
		writeJSON(w, 200, api.Whoami{Account: "team", Role: "member", TokenName: "ci", Via: "https"})
	})
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()
	var out, errOut bytes.Buffer
	g := newGlobalOptions(strings.NewReader("cairn_pipedtoken\ny\n"), &out, &errOut)
	if err := runLogin(context.Background(), loginOptions{URL: srv.URL}, g); err != nil {
		t.Fatalf("login: %v\n%s", err, errOut.String())
	}
	if bearer != "Bearer cairn_pipedtoken" {
		t.Errorf("the server saw %q", bearer)
	}
	if strings.Contains(errOut.String(), "API token:") {
		t.Errorf("a prompt for a pipe: %q", errOut.String())
	}
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if want := client.Fingerprint(srv.Certificate().Raw); cfg.Token != "cairn_pipedtoken" || cfg.Fingerprint != want || cfg.Host != srv.URL {
		t.Errorf("config %+v, want the token and %s", cfg, want)
	}
}

// On a terminal the token is read without echo: the prompt shows, the
// token typed does not.
func TestReadSecretOnATerminalDoesNotEcho(t *testing.T) {
	ptm, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	defer ptm.Close()
	defer tty.Close()
	var screen bytes.Buffer
	var smu sync.Mutex
	go func() {
		b := make([]byte, 256)
		for {
			n, err := ptm.Read(b)
			smu.Lock()
			screen.Write(b[:n])
			smu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	g := newGlobalOptions(tty, io.Discard, tty)
	if _, ok := g.stdinTerminal(); !ok {
		t.Fatal("a pseudo-terminal is not taken for a terminal")
	}
	got := make(chan string, 1)
	go func() {
		s, err := g.readSecret("API token: ")
		if err != nil {
			t.Errorf("readSecret: %v", err)
		}
		got <- s
	}()
	// Type only once echo is off, as a person would after the prompt.
	deadline := time.Now().Add(5 * time.Second)
	for {
		tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
		if err != nil {
			t.Fatal(err)
		}
		if tio.Lflag&unix.ECHO == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("echo was never turned off")
		}
		time.Sleep(5 * time.Millisecond)
	}
	ptm.Write([]byte("cairn_typedsecret\n"))
	select {
	case s := <-got:
		if s != "cairn_typedsecret" {
			t.Errorf("read %q", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("readSecret did not return")
	}
	time.Sleep(50 * time.Millisecond) // what the terminal shows reaches the buffer
	smu.Lock()
	defer smu.Unlock()
	if s := screen.String(); !strings.Contains(s, "API token: ") || strings.Contains(s, "typedsecret") {
		t.Errorf("the terminal showed %q: want the prompt and not the token", s)
	}
}

// readLine takes one line and leaves the rest; a last line without a
// newline is a line.
func TestReadLine(t *testing.T) {
	r := strings.NewReader(" one \ntwo\nthree")
	for _, want := range []string{"one", "two", "three"} {
		if got, err := readLine(r); got != want || err != nil {
			t.Errorf("readLine = %q, %v; want %q", got, err, want)
		}
	}
	if _, err := readLine(r); err != io.EOF {
		t.Errorf("at the end: %v, want EOF", err)
	}
}
