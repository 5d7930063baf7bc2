package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
)

// A console session opened on one host works through any other: its
// pages, the API calls it makes and a change with its CSRF token reach
// the host that holds it, and the page's origin is checked against the
// host the browser addressed. A call about a sandbox of a third host
// goes on to that host: the session's host does not serve it itself.
func TestHostsConsoleSessionOnAnyHost(t *testing.T) {
	c := startCluster(t)
	a := c.hosts[0]
	tok := a.token("default", "browser", "admin")
	a.create("web", "--network", "none")
	a.mustCLI("create", "far", "--on", "b", "--network", "none")
	a.sh("far", "echo on b > /f")
	client := httpsClient()
	call := func(host int, method, path, cookie, csrf, body string) (int, string) {
		t.Helper()
		base := c.infos[host].Listen
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Origin", base)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: "cairn_session", Value: cookie})
		}
		if csrf != "" {
			req.Header.Set("X-Cairn-CSRF", csrf)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if method == "POST" && path == "/console/session" {
			for _, ck := range resp.Cookies() {
				if ck.Name == "cairn_session" {
					return resp.StatusCode, ck.Value + "\n" + string(b)
				}
			}
		}
		return resp.StatusCode, string(b)
	}

	status, out := call(0, "POST", "/console/session", "", "", `{"token":"`+tok.Token+`"}`)
	cookie, body, _ := strings.Cut(out, "\n")
	var info struct{ CSRF string }
	if status != 200 || json.Unmarshal([]byte(body), &info) != nil || info.CSRF == "" {
		t.Fatalf("login on a: %d %s", status, out)
	}
	if status, out := call(1, "GET", "/console/session", cookie, "", ""); status != 200 || !strings.Contains(out, `"account":"default"`) {
		t.Fatalf("a's session asked on b: %d %s", status, out)
	}
	if status, out := call(2, "GET", "/v1/sandboxes", cookie, "", ""); status != 200 || !strings.Contains(out, `"web"`) {
		t.Fatalf("the sandbox list with a's session on c: %d %s", status, out)
	}
	if status, out := call(2, "GET", "/v1/sandboxes/far/files?path=/f", cookie, "", ""); status != 200 || out != "on b\n" {
		t.Fatalf("a file of b's sandbox, with a's session, through c: %d %q", status, out)
	}
	// A change without the CSRF token is refused there as here.
	if status, out := call(1, "POST", "/v1/sandboxes/web/stop", cookie, "", "{}"); status != http.StatusForbidden || !strings.Contains(out, api.CodeCSRF) {
		t.Fatalf("a change through b without the CSRF token: %d %s", status, out)
	}
	if status, out := call(1, "DELETE", "/console/session", cookie, info.CSRF, ""); status != http.StatusNoContent {
		t.Fatalf("logout through b: %d %s", status, out)
	}
	if status, _ := call(0, "GET", "/console/session", cookie, "", ""); status != http.StatusUnauthorized {
		t.Fatalf("the session on a after the logout through b: %d, want 401", status)
	}
}
