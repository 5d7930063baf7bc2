package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairn-sandbox/cairn/api"
)

// The console's session: every change sent with the cookie but without
// the session's CSRF token (or with a wrong one, or from another origin)
// is refused with A09, route by route from the OpenAPI document; a
// logged-out session cannot act; a second account's session sees none of
// the first's objects on any page; a revoked token ends its session.
func TestConsoleSessionsAndIsolation(t *testing.T) {
	needChromium(t)
	d, base, pin, aliceTok, bobTok := consoleDaemon(t)
	alice := d.remoteUser(t, "CAIRN_HOST="+base, "CAIRN_TOKEN="+aliceTok.Token, pin)
	alice.must("create", "web", "--image", "busybox", "--network", "none")
	alice.must("checkpoint", "create", "web", "--comment", "alice's secret")
	alice.must("snapshot", "create", "web", "--name", "golden")
	var snaps []api.Checkpoint
	json.Unmarshal([]byte(alice.must("--json", "snapshot", "list")), &snaps)
	if len(snaps) == 0 {
		t.Fatal("alice has no snapshots")
	}

	b := newBrowser(t, d, base)
	b.login(aliceTok.Token, "alice")
	ck := b.sessionCookie()
	csrf := sessionCSRF(t, base, ck)

	// Every change of the API, with the cookie alone: A09.
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	req, _ := http.NewRequest("GET", base+"/v1/openapi.json", nil)
	req.AddCookie(ck)
	res, err := httpsClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(res.Body).Decode(&doc); err != nil || len(doc.Paths) < 10 {
		t.Fatalf("GET /v1/openapi.json with the cookie: %d %v", res.StatusCode, err)
	}
	res.Body.Close()
	wild := regexp.MustCompile(`\{[^}]+\}`)
	changes := 0
	for path, ops := range doc.Paths {
		for method := range ops {
			m := strings.ToUpper(method)
			if m == "GET" || m == "HEAD" || m == "PARAMETERS" {
				continue
			}
			p := wild.ReplaceAllString(path, "web")
			for _, bad := range []string{"", "wrong-" + csrf[:8]} {
				if status, code := request(t, base, m, p, ck, bad, "{}"); status != http.StatusForbidden || code != api.CodeCSRF {
					t.Errorf("%s %s with the cookie and CSRF %q: %d %s, want 403 %s", m, p, bad, status, code, api.CodeCSRF)
				}
			}
			changes++
		}
	}
	if changes < 20 {
		t.Errorf("only %d changes in the OpenAPI document", changes)
	}
	// The console's own changes, the terminal and the logout, too.
	if status, code := request(t, base, "DELETE", "/console/session", ck, "", ""); status != 403 || code != api.CodeCSRF {
		t.Errorf("logout without CSRF: %d %s", status, code)
	}
	if status, code := request(t, base, "GET", "/console/terminal/web", ck, "", ""); status != 403 || code != api.CodeCSRF {
		t.Errorf("terminal without CSRF: %d %s", status, code)
	}
	// The browser's own fetch without the header: refused the same way.
	if got := eval[string](b, `fetch("/v1/sandboxes/web/stop", {method: "POST", headers: {"Content-Type": "application/json"}, body: "{}"}).then(async (r) => r.status + " " + (await r.json()).error.code)`); got != "403 A09" {
		t.Errorf("the page's fetch without CSRF: %s", got)
	}
	// The right token from another origin: refused; from this one: works.
	oreq, _ := http.NewRequest("POST", base+"/v1/sandboxes/web/checkpoint", strings.NewReader(`{"comment":"x"}`))
	oreq.AddCookie(ck)
	oreq.Header.Set("X-Cairn-CSRF", csrf)
	oreq.Header.Set("Origin", "https://evil.example")
	if res, err := httpsClient().Do(oreq); err != nil || res.StatusCode != 403 {
		t.Errorf("a change from another origin: %v %v", res, err)
	}
	if status, code := request(t, base, "POST", "/v1/sandboxes/web/checkpoint", ck, csrf, `{"comment":"by cookie"}`); status != http.StatusOK && status != http.StatusAccepted {
		t.Errorf("a change with the cookie and its CSRF token: %d %s", status, code)
	}
	var log []api.AuditEntry
	json.Unmarshal([]byte(d.mustCLI("--json", "audit")), &log)
	found := false
	for _, e := range log {
		if e.Action == "checkpoint.create" && e.TokenName == "console" && e.Target == "web" && e.Outcome == "accepted" {
			found = true
		}
	}
	if !found {
		t.Errorf("the cookie's checkpoint is not in the audit log as alice's console token: %+v", log)
	}

	// Log out from the page: the old cookie (and its CSRF token) can no
	// longer read or act.
	b.do("log out", chromedp.Click(chromedp.ID("logout")))
	b.wait("the login form", `!!document.querySelector("#token")`, 30*time.Second)
	for _, rq := range [][3]string{{"GET", "/v1/sandboxes", ""}, {"POST", "/v1/sandboxes/web/stop", "{}"}, {"DELETE", "/v1/sandboxes/web", ""}, {"GET", "/console/session", ""}} {
		if status, code := request(t, base, rq[0], rq[1], ck, csrf, rq[2]); status != http.StatusUnauthorized || code != api.CodeUnauthenticated {
			t.Errorf("%s %s after logout: %d %s, want 401 %s", rq[0], rq[1], status, code, api.CodeUnauthenticated)
		}
	}
	if got := alice.must("--json", "info", "web"); !strings.Contains(got, `"state": "running"`) && !strings.Contains(got, `"state":"running"`) {
		t.Errorf("web after the logged-out session's stop: %s", got)
	}

	// Bob sees nothing of alice's on any page.
	b.login(bobTok.Token, "bob")
	b.open("#/sandboxes", "Sandboxes")
	b.textShown("bob's empty list", "No sandboxes yet", 30*time.Second)
	b.open("#/snapshots", "Snapshots")
	b.textShown("bob's empty snapshots", "No snapshots or checkpoints yet.", 30*time.Second)
	b.open("#/account", "Account")
	b.textShown("bob's account", "0 sandboxes · 0 checkpoints", 30*time.Second)
	b.do("open alice's sandbox by name", chromedp.Navigate(base+"/#/sandbox/web"))
	b.textShown("the answer of a missing sandbox", "error "+api.CodeNoSandbox, 30*time.Second)
	for _, s := range []string{"alice's secret", "golden", snaps[0].GlobalID} {
		if strings.Contains(eval[string](b, `document.body.innerText`), s) {
			t.Errorf("bob's page shows %q", s)
		}
	}
	mine := eval[string](b, fmt.Sprintf(`fetch("/v1/snapshots/%s/restore", {method: "POST", headers: {"Content-Type": "application/json", "X-Cairn-CSRF": "x"}, body: "{}"}).then((r) => String(r.status))`, snaps[0].GlobalID))
	if mine != "403" {
		t.Errorf("bob's restore of alice's snapshot with a wrong CSRF token: %s", mine)
	}

	// Revoking bob's token ends his session at its next request.
	bobCk := b.sessionCookie()
	d.mustCLI("token", "revoke", bobTok.Info.ID)
	if status, code := request(t, base, "GET", "/v1/sandboxes", bobCk, "", ""); status != http.StatusUnauthorized || code != api.CodeUnauthenticated {
		t.Errorf("a revoked token's session: %d %s", status, code)
	}
	b.do("reload", chromedp.Navigate(base+"/#/sandboxes"))
	b.wait("the login form after the revoke", `!!document.querySelector("#token")`, 30*time.Second)

	// A read token's session looks and does not offer changes.
	viewer := d.token("alice", "viewer", "read")
	b.login(viewer.Token, "alice")
	b.open("#/sandboxes", "Sandboxes")
	b.wait("alice's sandbox, read-only", `!!document.querySelector('a[href="#/sandbox/web"]') && document.body.innerText.includes("read-only")`, 30*time.Second)
	if shown := eval[bool](b, `document.querySelector("#create").offsetParent !== null || [...document.querySelectorAll("button")].some((x) => x.offsetParent !== null && x.textContent === "Delete")`); shown {
		t.Error("a read token's page offers create or delete")
	}
	if got := eval[string](b, `fetch("/v1/sandboxes/web/stop", {method: "POST", headers: {"Content-Type": "application/json", "X-Cairn-CSRF": "`+sessionCSRF(t, base, b.sessionCookie())+`"}, body: "{}"}).then(async (r) => r.status + " " + (await r.json()).error.code)`); got != "403 "+api.CodeForbidden {
		t.Errorf("a read session's stop: %s", got)
	}
	b.do("log out", chromedp.Click(chromedp.ID("logout")))
	b.wait("the login form", `!!document.querySelector("#token")`, 30*time.Second)

	// An admin makes and revokes tokens on the account page.
	admin := d.token("default", "ops", "admin")
	b.login(admin.Token, "default")
	b.open("#/account", "Account")
	b.wait("the token form", `!!document.querySelector("#tok-name")`, 30*time.Second)
	b.accessible("account (admin)")
	b.shot("account-admin")
	b.do("make a token", chromedp.SendKeys(chromedp.ID("tok-name"), "ci"), chromedp.SendKeys(chromedp.ID("tok-account"), "alice"),
		chromedp.SetValue(chromedp.ID("tok-role"), "read"), chromedp.Click(chromedp.ID("tok-create")))
	b.wait("the new token's secret", `(document.querySelector("#tok-secret") || {textContent: ""}).textContent.startsWith("cairn_")`, 30*time.Second)
	secret := eval[string](b, `document.querySelector("#tok-secret").textContent`)
	ci := d.remoteUser(t, "CAIRN_HOST="+base, "CAIRN_TOKEN="+secret, pin)
	var who api.Whoami
	json.Unmarshal([]byte(ci.must("--json", "whoami")), &who)
	if who.Account != "alice" || who.Role != "read" || who.TokenName != "ci" {
		t.Errorf("the page's token: %+v", who)
	}
	b.click("Revoke token ci")
	b.answer()
	b.textShown("the revoke", "Token ci revoked.", 30*time.Second)
	if code, _ := ci.errorCode("list"); code != api.CodeUnauthenticated {
		t.Errorf("the token revoked on the page: %s", code)
	}
}
