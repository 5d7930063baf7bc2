package integration

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The console's tests drive Debian's chromium, headless, with chromedp:
// a fresh profile each, network only to the loopback cairnd, and the
// cairnd's self-signed certificate trusted by its public key alone.

const chromiumPath = "/usr/bin/chromium"

// browser is one headless Chromium on one tab.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string // https://127.0.0.1:PORT
}

// needChromium fails (CI=true) or skips the test when chromium is missing.
func needChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not installed (scripts/install-deps.sh --test installs it): %v", chromiumPath, err)
		}
		t.Skipf("%s not installed", chromiumPath)
	}
}

// spkiHash is the base64 SHA-256 of the public key of the PEM
// certificate at path, as --ignore-certificate-errors-spki-list wants.
func spkiHash(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// newBrowser starts Chromium for d's console at base.
func newBrowser(t *testing.T, d *daemon, base string) *browser {
	t.Helper()
	needChromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("no-proxy-server", true),
		chromedp.Flag("ignore-certificate-errors-spki-list", spkiHash(t, filepath.Join(d.dataDir, "tls", "cert.pem"))),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 8*time.Minute)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	b := &browser{t: t, ctx: ctx, base: base}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	// The page's console and errors into the test's log.
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			t.Logf("browser console: %s", m)
		}
	}()
	return b
}

// do runs steps, failing the test with what it was doing.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body.innerText`))
		b.t.Logf("page:\n%s", text)
		b.shot("failure")
		b.t.Fatalf("browser: %s: %v", what, err)
	}
}

// wait waits until the JavaScript expression is true.
func (b *browser) wait(what, expr string, timeout time.Duration) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body.innerText`))
		b.shot("failure")
		b.t.Fatalf("browser: waiting for %s (%s): %v\npage:\n%s", what, expr, err, text)
	}
}

// eval evaluates a JavaScript expression (awaiting a promise).
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("browser: eval %s: %v", expr, err)
	}
	return v
}

// navigate loads url and waits for the console's modules to start. A
// load whose requests Chromium dropped because the host's network
// changed (ERR_NETWORK_CHANGED: other tests' sandboxes add and remove
// links all the time) is tried again.
func (b *browser) navigate(url string) {
	b.t.Helper()
	for try := 0; ; try++ {
		b.do("open "+url, chromedp.Navigate(url))
		_, err := chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void](`document.body.dataset.started === "1"`,
			chromedp.WithPollingTimeout(15*time.Second), chromedp.WithPollingInterval(100*time.Millisecond)))
		if err == nil {
			return
		}
		if try == 2 {
			b.t.Fatalf("the console did not start at %s: %v", url, err)
		}
		b.t.Logf("the console did not start at %s (%v): loading it again", url, err)
		b.do("leave", chromedp.Navigate("about:blank"))
	}
}

// open goes to a page of the console and waits for its heading.
func (b *browser) open(hash, heading string) {
	b.t.Helper()
	b.navigate(b.base + "/" + hash)
	b.wait("the "+heading+" page", fmt.Sprintf(`(() => { const h = document.querySelector("main h1"); return h && h.textContent.startsWith(%q) && document.querySelector("main").dataset.ready === %q; })()`, heading, hash), 60*time.Second)
}

// click clicks the button whose accessible label (or text) is label.
func (b *browser) click(label string) {
	b.t.Helper()
	js := fmt.Sprintf(`(() => { const l = %q; const btn = [...document.querySelectorAll("button")].find((x) => x.getAttribute("aria-label") === l || x.textContent === l); if (!btn || btn.disabled) return false; setTimeout(() => btn.click(), 0); return true; })()`, label)
	b.wait("a button "+strconv.Quote(label), js, 30*time.Second)
}

// answer fills in the fields of the dialog that is open, with the
// keyboard, and confirms it.
func (b *browser) answer(values ...string) {
	b.t.Helper()
	b.wait("a dialog", `!!document.querySelector("dialog[open]")`, 30*time.Second)
	for i, v := range values {
		id := chromedp.ID(fmt.Sprintf("dialog-field-%d", i))
		b.do("fill in the dialog", chromedp.Clear(id), chromedp.SendKeys(id, v))
	}
	b.do("confirm the dialog", chromedp.Click(chromedp.ID("dialog-ok")))
	b.wait("the dialog closed", `!document.querySelector("dialog[open]")`, 30*time.Second)
}

// accessible checks the page's controls: every field has a label,
// every button and link a name.
func (b *browser) accessible(page string) {
	b.t.Helper()
	bad := eval[[]string](b, `[...document.querySelectorAll("input:not([type=hidden]), select, textarea:not(.xterm-helper-textarea), button, a")]
		.filter((e) => e.offsetParent !== null)
		.filter((e) => {
			if (e.matches("input, select, textarea")) return !(e.labels && e.labels.length) && !e.getAttribute("aria-label");
			return !(e.getAttribute("aria-label") || e.textContent.trim());
		})
		.map((e) => e.outerHTML.slice(0, 120))`)
	if len(bad) > 0 {
		b.t.Errorf("%s: controls without a label or name: %q", page, bad)
	}
}

// textShown waits until the page's text holds s.
func (b *browser) textShown(what, s string, timeout time.Duration) {
	b.t.Helper()
	b.wait(what, fmt.Sprintf(`document.body.innerText.includes(%q)`, s), timeout)
}

// shotsDir is docs/console/ of the source tree.
func shotsDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "docs", "console")
}

// shot saves the page as docs/console/NAME-desktop.png (1280 px wide) and
// NAME-phone.png (390 px); "failure" goes to the test's log directory.
func (b *browser) shot(name string) {
	b.t.Helper()
	if name == "failure" {
		png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
		if err == nil {
			p := filepath.Join(os.TempDir(), "cairn-console-failure.png")
			os.WriteFile(p, png, 0o644)
			b.t.Logf("screenshot of the failure: %s", p)
		}
		return
	}
	os.MkdirAll(shotsDir(), 0o755)
	for _, v := range []struct {
		suffix string
		w, h   int64
	}{{"desktop", 1280, 900}, {"phone", 390, 844}} {
		b.do("viewport", chromedp.EmulateViewport(v.w, v.h), chromedp.Sleep(300*time.Millisecond))
		png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
		if err != nil {
			b.t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shotsDir(), name+"-"+v.suffix+".png"), png, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
	b.do("viewport", chromedp.EmulateViewport(1280, 900))
}

// httpsClient is a client for cairnd's listener that trusts its
// certificate (the test's own requests: cookies and headers by hand).
func httpsClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
}
