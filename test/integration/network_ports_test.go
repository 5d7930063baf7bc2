package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// webServer starts busybox httpd on port 8080 inside sandbox name, serving
// a page that names the sandbox it was started in.
func (d *daemon) webServer(name string) {
	d.t.Helper()
	d.sh(name, "mkdir -p /www && echo page of "+name+" > /www/index.html")
	d.mustCLI("exec", name, "-d", "--", "httpd", "-f", "-p", "8080", "-h", "/www")
	d.waitServing(name)
}

// waitServing waits until something answers on port 8080 inside name.
func (d *daemon) waitServing(name string) {
	d.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := d.execOut(10*time.Second, name, "wget", "-q", "-O", "/dev/null", "http://127.0.0.1:8080/"); err == nil {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("nothing serves on port 8080 in %s", name)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// publish publishes port 8080 of name and returns its URLs.
func (d *daemon) publish(name string, flags ...string) api.Port {
	d.t.Helper()
	var p api.Port
	out := d.mustCLI(append([]string{"--json", "port", "publish", name, "8080"}, flags...)...)
	if err := json.Unmarshal([]byte(out), &p); err != nil || p.URL == "" {
		d.t.Fatalf("port publish: %q %v", out, err)
	}
	return p
}

// viaProxy fetches a URL of the port proxy from the test, with the token
// ("" for none); the host form's name is given as the Host header, so no
// DNS is needed. It returns the status and body.
func viaProxy(t *testing.T, rawURL, token string) (int, string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	host := u.Host
	port := u.Port()
	dial := *u
	dial.Host = "127.0.0.1:" + port
	req, _ := http.NewRequest("GET", dial.String(), nil)
	req.Host = host
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", rawURL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (d *daemon) portToken() string {
	d.t.Helper()
	var tok api.PortToken
	if err := json.Unmarshal([]byte(d.mustCLI("--json", "port", "token")), &tok); err != nil || tok.Token == "" {
		d.t.Fatalf("port token: %v", err)
	}
	return tok.Token
}

// A published port is reached through the proxy by both URL forms, a
// private one only with the token; the network and the port come back
// after a memory checkpoint's rollback and in each fork of it (with its
// own URL and its own NAT), and the parent keeps its own.
func TestNetworkAndPortsAcrossCheckpointsAndForks(t *testing.T) {
	d := startDaemon(t)
	in := d.internet
	d.create("web")
	d.webServer("web")
	private := d.publish("web")
	token := d.portToken()

	for _, u := range []string{private.URL, private.PathURL} {
		if code, _ := viaProxy(t, u, ""); code != http.StatusUnauthorized {
			t.Fatalf("%s without the token: %d, want 401", u, code)
		}
		if code, body := viaProxy(t, u, token); code != 200 || !strings.Contains(body, "page of web") {
			t.Fatalf("%s with the token: %d %q", u, code, body)
		}
	}
	public := d.publish("web", "--public")
	if code, body := viaProxy(t, public.URL, ""); code != 200 || !strings.Contains(body, "page of web") {
		t.Fatalf("a public port without the token: %d %q", code, body)
	}

	wgetName := func(name string) error {
		_, err := d.execOut(30*time.Second, name, "timeout", "5", "wget", "-q", "-O", "-", "http://allowed.test/")
		return err
	}
	if err := wgetName("web"); err != nil {
		t.Fatalf("wget by name: %v", err)
	}

	// A memory checkpoint, then a change, then the rollback: the server
	// runs again (resumed, not restarted), reachable through the proxy,
	// and outbound networking works.
	ck := d.checkpoint("web", "--memory")
	d.sh("web", "echo changed > /www/index.html")
	d.mustCLI("rollback", "web", ck.ID)
	if code, body := viaProxy(t, public.URL, ""); code != 200 || !strings.Contains(body, "page of web") {
		t.Fatalf("after the memory rollback: %d %q", code, body)
	}
	if err := wgetName("web"); err != nil {
		t.Fatalf("outbound after the memory rollback: %v", err)
	}

	// Three forks of the memory checkpoint: each fetches from the test
	// internet and serves its own URL; the parent still does both.
	var kids []api.Sandbox
	if err := json.Unmarshal([]byte(d.mustCLI("--json", "fork", "web", "--from-checkpoint", ck.ID, "--count", "3")), &kids); err != nil || len(kids) != 3 {
		t.Fatalf("fork: %v %+v", err, kids)
	}
	before := in.Hits(in.Allowed)
	for _, k := range kids {
		if err := wgetName(k.Name); err != nil {
			t.Fatalf("fork %s: outbound: %v", k.Name, err)
		}
		var ports []api.Port
		if err := json.Unmarshal([]byte(d.mustCLI("--json", "port", "list", k.Name)), &ports); err != nil || len(ports) != 1 {
			t.Fatalf("fork %s: ports %+v %v", k.Name, ports, err)
		}
		if !strings.Contains(ports[0].URL, k.Name) || !ports[0].Public {
			t.Fatalf("fork %s: its port %+v", k.Name, ports[0])
		}
		d.sh(k.Name, "echo page of "+k.Name+" > /www/index.html")
		if code, body := viaProxy(t, ports[0].URL, ""); code != 200 || !strings.Contains(body, "page of "+k.Name) {
			t.Fatalf("fork %s through its own URL: %d %q", k.Name, code, body)
		}
	}
	if got := in.Hits(in.Allowed) - before; got != 3 {
		t.Errorf("the test internet answered %d requests of the three forks, want 3", got)
	}
	if err := wgetName("web"); err != nil {
		t.Fatalf("the parent after the forks: %v", err)
	}
	if code, body := viaProxy(t, public.URL, ""); code != 200 || !strings.Contains(body, "page of web") {
		t.Fatalf("the parent's own URL after the forks: %d %q", code, body)
	}

	// A stopped sandbox's port answers P03; an unpublished one P01.
	d.mustCLI("stop", kids[0].Name)
	var ports []api.Port
	json.Unmarshal([]byte(d.mustCLI("--json", "port", "list", kids[0].Name)), &ports)
	if code, body := viaProxy(t, ports[0].URL, token); code != http.StatusServiceUnavailable || !strings.Contains(body, api.CodePortNotRunning) {
		t.Fatalf("a stopped sandbox's port: %d %q", code, body)
	}
	d.mustCLI("port", "unpublish", "web", "8080")
	if code, body := viaProxy(t, public.URL, token); code != http.StatusNotFound || !strings.Contains(body, api.CodePortNotPublished) {
		t.Fatalf("an unpublished port: %d %q", code, body)
	}

	for _, name := range []string{"web", kids[0].Name, kids[1].Name, kids[2].Name} {
		d.mustCLI("delete", name)
	}
	d.checkNoNetworkLeft()
	_ = fmt.Sprint
}
