package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/cairn-sandbox/cairn/api"
)

// consoleDaemon starts a cairnd with its HTTPS listener, and accounts
// alice and bob with a member token each.
func consoleDaemon(t *testing.T) (d *daemon, base, pin string, alice, bob api.NewToken) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	ln.Close()
	d = startDaemon(t, "--listen", listen)
	info, err := d.client.ServerInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d.mustCLI("account", "create", "alice", "--disk-limit", "1G")
	d.mustCLI("account", "create", "bob")
	return d, "https://" + listen, "CAIRN_TLS_FINGERPRINT=" + info.TLSFingerprint, d.token("alice", "console", "member"), d.token("bob", "console", "member")
}

// login logs the browser in with token and waits for the account's name.
func (b *browser) login(token, account string) {
	b.t.Helper()
	b.navigate(b.base + "/")
	b.wait("the login form", `!!document.querySelector("#token")`, 30*time.Second)
	// With the keyboard: the token, then Enter.
	b.do("log in", chromedp.SendKeys(chromedp.ID("token"), token+"\r"))
	b.wait("the account's name", `(document.querySelector("#who-account") || {}).textContent === "`+account+`"`, 30*time.Second)
}

// typeTerminal types a line into the page's terminal: the text as one
// input (key events would reach xterm.js twice, as keydown and as char),
// then Enter.
func (b *browser) typeTerminal(line string) {
	b.t.Helper()
	b.do("focus the terminal", chromedp.Focus(chromedp.CSS(".xterm-helper-textarea")))
	if _, err := chromedp.Call(b.ctx, input.InsertText, input.InsertTextParams{Text: line}); err != nil {
		b.t.Fatal(err)
	}
	b.do("press enter", chromedp.SendKeys(chromedp.CSS(".xterm-helper-textarea"), "\r"))
}

// sessionCookie is the browser's console session cookie.
func (b *browser) sessionCookie() *http.Cookie {
	b.t.Helper()
	res, err := chromedp.Call(b.ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{b.base + "/"}})
	if err != nil {
		b.t.Fatal(err)
	}
	for _, c := range res.Cookies {
		if c.Name == "cairn_session" {
			if !c.HTTPOnly || !c.Secure || c.SameSite != network.CookieSameSiteStrict {
				b.t.Errorf("session cookie %+v: want HttpOnly, Secure, SameSite=Strict", c)
			}
			return &http.Cookie{Name: c.Name, Value: c.Value}
		}
	}
	b.t.Fatal("no cairn_session cookie")
	return nil
}

// request sends one request with the cookie (and csrf, when not "") and
// returns its status and error code.
func request(t *testing.T, base, method, path string, ck *http.Cookie, csrf, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	req.AddCookie(ck)
	req.Header.Set("Content-Type", "application/json")
	if csrf != "" {
		req.Header.Set("X-Cairn-CSRF", csrf)
	}
	res, err := httpsClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var eb api.ErrorBody
	json.Unmarshal(b, &eb)
	return res.StatusCode, eb.Error.Code
}

// sessionCSRF reads the session's CSRF token as the pages do.
func sessionCSRF(t *testing.T, base string, ck *http.Cookie) string {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/console/session", nil)
	req.AddCookie(ck)
	res, err := httpsClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var s struct{ CSRF string }
	json.NewDecoder(res.Body).Decode(&s)
	if res.StatusCode != 200 || s.CSRF == "" {
		t.Fatalf("GET /console/session: %d", res.StatusCode)
	}
	return s.CSRF
}

// The console end to end: log in with a token, create a sandbox from the
// page, write a file in its terminal, checkpoint it with a comment,
// restore that checkpoint into a new name from the Snapshots page (the
// file is there), fork ×2; every page screenshotted at 1280 px and at a
// phone's width into docs/console/.
func TestConsoleWorkflow(t *testing.T) {
	needChromium(t)
	d, base, pin, aliceTok, _ := consoleDaemon(t)
	alice := d.remoteUser(t, "CAIRN_HOST="+base, "CAIRN_TOKEN="+aliceTok.Token, pin)
	b := newBrowser(t, d, base)

	b.navigate(base + "/")
	b.wait("the login form", `!!document.querySelector("#token")`, 30*time.Second)
	if eval[bool](b, `document.querySelector("#nav").offsetParent !== null || document.querySelector("#logout").offsetParent !== null`) {
		t.Error("the login page shows the navigation or Log out")
	}
	b.accessible("login")
	b.shot("login")
	b.login(aliceTok.Token, "alice")
	if role := eval[string](b, `document.querySelector("#who-role").textContent`); role != "member" {
		t.Errorf("role shown: %q", role)
	}

	// Create a sandbox from the page.
	b.open("#/sandboxes", "Sandboxes")
	b.do("fill in the create form", chromedp.SendKeys(chromedp.ID("new-name"), "web"),
		chromedp.SetValue(chromedp.ID("new-network"), "none"), chromedp.Click(chromedp.ID("create")))
	b.wait("web listed as running", `[...document.querySelectorAll("tr")].some((r) => r.innerText.includes("web") && r.innerText.includes("running"))`, 5*time.Minute)
	b.accessible("sandboxes")
	b.shot("sandboxes")

	// Its page: a shell in the terminal writes a file.
	b.open("#/sandbox/web", "Sandbox web")
	b.do("open the terminal", chromedp.Click(chromedp.ID("term-open")))
	b.textShown("the terminal connected", "Connected: a shell in the sandbox.", 60*time.Second)
	b.typeTerminal("echo from-the-console > /note; echo written")
	b.wait("the shell's answer", `document.querySelector(".xterm-rows").innerText.includes("written")`, 30*time.Second)

	// A checkpoint with a comment.
	b.do("checkpoint", chromedp.SendKeys(chromedp.ID("ck-comment"), "before the change"), chromedp.Click(chromedp.ID("ck-create")))
	b.wait("the checkpoint listed", `[...document.querySelectorAll("td")].some((td) => td.textContent === "before the change")`, 2*time.Minute)
	b.textShown("the checkpoint's id", "Checkpoint created: v", 30*time.Second)
	b.accessible("sandbox")
	b.shot("sandbox")

	// The file changes after the checkpoint.
	b.typeTerminal("echo changed > /note; echo again")
	b.wait("the shell's answer", `document.querySelector(".xterm-rows").innerText.includes("again")`, 30*time.Second)

	// Snapshots: restore it into a new name.
	b.open("#/snapshots", "Snapshots")
	b.wait("the checkpoint listed", `[...document.querySelectorAll("td")].some((td) => td.textContent === "before the change")`, 30*time.Second)
	ck := eval[string](b, `[...document.querySelectorAll("tr")].find((r) => r.innerText.includes("before the change")).querySelector("td").textContent`)
	b.accessible("snapshots")
	b.shot("snapshots")
	label := eval[string](b, `[...document.querySelectorAll("tr")].find((r) => r.innerText.includes("before the change")).querySelector("button").getAttribute("aria-label")`)
	b.click(label)
	b.answer("web-copy")
	b.textShown("the restore's end", "web-copy was made from", 5*time.Minute)
	b.open("#/sandboxes", "Sandboxes")
	b.wait("web-copy listed", `!!document.querySelector('a[href="#/sandbox/web-copy"]')`, 30*time.Second)
	// In the new sandbox's terminal the old file is back.
	b.open("#/sandbox/web-copy", "Sandbox web-copy")
	b.do("open the terminal", chromedp.Click(chromedp.ID("term-open")))
	b.textShown("the terminal connected", "Connected: a shell in the sandbox.", 60*time.Second)
	b.typeTerminal("cat /note")
	b.wait("the old file in web-copy's terminal", `document.querySelector(".xterm-rows").innerText.includes("from-the-console")`, 30*time.Second)
	if got := alice.must("exec", "web-copy", "--", "cat", "/note"); got != "from-the-console\n" {
		t.Errorf("web-copy's /note: %q (restored from %s)", got, ck)
	}
	if got := alice.must("exec", "web", "--", "cat", "/note"); got != "changed\n" {
		t.Errorf("web's /note: %q", got)
	}

	// Fork ×2.
	b.open("#/sandboxes", "Sandboxes")
	b.click("Fork web")
	b.answer("2")
	b.wait("both forks listed", `!!document.querySelector('a[href="#/sandbox/web-fork-1"]') && !!document.querySelector('a[href="#/sandbox/web-fork-2"]')`, 5*time.Minute)

	// The account page; its disk figure moves with what the sandboxes
	// hold.
	b.open("#/account", "Account")
	b.wait("the disk meter", `!!document.querySelector("#disk-meter")`, 30*time.Second)
	b.accessible("account")
	b.shot("account")
	used := func() int64 {
		return int64(eval[float64](b, `Number(document.querySelector("#disk-meter").getAttribute("aria-valuenow"))`))
	}
	before := used()
	alice.must("exec", "web", "--", "sh", "-c", "head -c 8388608 /dev/urandom > /root/big; sync")
	// Without a reload: the page follows.
	b.wait("the disk figure to follow an 8 MiB file", fmt.Sprintf(`Number(document.querySelector("#disk-meter").getAttribute("aria-valuenow")) >= %d`, before+8<<20), 90*time.Second)
	if !strings.Contains(eval[string](b, `document.querySelector("#disk-text").textContent`), "of 1.0 GiB (the account's limit)") {
		t.Errorf("the disk text: %q", eval[string](b, `document.querySelector("#disk-text").textContent`))
	}

	// Delete both forks from the page.
	b.open("#/sandboxes", "Sandboxes")
	for _, n := range []string{"web-fork-1", "web-fork-2"} {
		b.click("Delete " + n)
		b.answer()
		b.wait(n+" gone", `!document.querySelector('a[href="#/sandbox/`+n+`"]')`, 3*time.Minute)
	}
	if got := alice.must("list"); strings.Contains(got, "web-fork") {
		t.Errorf("forks left after deleting them: %s", got)
	}
}
