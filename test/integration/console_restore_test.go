package integration

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Restore in place from a sandbox's page, then undo it from the page: the
// file written between is back. On the way: the diff between the
// checkpoint and now, and the terminal saying plainly that the restore
// ended its session.
func TestConsoleRestoreInPlaceAndUndo(t *testing.T) {
	needChromium(t)
	d, base, pin, aliceTok, _ := consoleDaemon(t)
	alice := d.remoteUser(t, "CAIRN_HOST="+base, "CAIRN_TOKEN="+aliceTok.Token, pin)
	alice.must("create", "app", "--image", "busybox", "--network", "none")
	alice.must("exec", "app", "--", "sh", "-c", "echo one > /f")
	b := newBrowser(t, d, base)
	b.login(aliceTok.Token, "alice")

	b.open("#/sandbox/app", "Sandbox app")
	b.do("checkpoint", chromedp.SendKeys(chromedp.ID("ck-comment"), "one"), chromedp.Click(chromedp.ID("ck-create")))
	b.wait("the checkpoint listed", `[...document.querySelectorAll("td")].some((td) => td.textContent === "one")`, 2*time.Minute)
	id := eval[string](b, `[...document.querySelectorAll("tr")].find((r) => r.innerText.includes("one")).querySelector("td").textContent`)
	alice.must("exec", "app", "--", "sh", "-c", "echo two > /f; echo new > /g")

	// What changed since the checkpoint.
	b.do("compare", chromedp.SetValue(chromedp.ID("diff-from"), id), chromedp.SetValue(chromedp.ID("diff-to"), ""), chromedp.Click(chromedp.ID("diff-show")))
	b.wait("the diff", `(() => { const t = document.querySelector("#diff-out").innerText; return t.includes("~ /f") && t.includes("+ /g"); })()`, 30*time.Second)
	// The text diff of the changed file.
	b.click("Show the text diff of /f")
	b.wait("the text diff", `(() => { const p = document.querySelector("#diff-out pre.diff"); return !!p && p.innerText.includes("-one") && p.innerText.includes("+two"); })()`, 30*time.Second)
	if got := alice.must("diff", "app", id, "--file", "/f"); !strings.Contains(got, "@@ -1 +1 @@\n-one\n+two\n") {
		t.Errorf("cairn diff --file /f: %q", got)
	}

	// A terminal is open while the restore runs.
	b.do("open the terminal", chromedp.Click(chromedp.ID("term-open")))
	b.textShown("the terminal connected", "Connected: a shell in the sandbox.", 60*time.Second)

	// The shell goes on across a memory checkpoint taken from the page
	// (the agent's connection breaks and is re-attached).
	b.do("checkpoint with memory", chromedp.SendKeys(chromedp.ID("ck-comment"), "with memory"), chromedp.Click(chromedp.ID("ck-memory")), chromedp.Click(chromedp.ID("ck-create")))
	b.wait("the memory checkpoint listed", `[...document.querySelectorAll("tr")].some((r) => r.innerText.includes("with memory") && r.innerText.includes("yes"))`, 3*time.Minute)
	b.typeTerminal("echo still-here")
	b.wait("the shell after the memory checkpoint", `document.querySelector(".xterm-rows").innerText.includes("\nstill-here")`, 60*time.Second)

	// The terminal follows the window's size (resize frames).
	seen := 0 // COLS= lines already read
	cols := func() int {
		re := regexp.MustCompile(`COLS=(\d+)`)
		for try := 0; try < 3; try++ {
			// Typed input can be lost while the terminal re-fits itself:
			// the line is typed again then.
			b.typeTerminal("echo COLS=$(stty size | cut -d' ' -f2)")
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				m := re.FindAllStringSubmatch(eval[string](b, `document.querySelector(".xterm-rows").innerText`), -1)
				if len(m) > seen {
					seen = len(m)
					n, _ := strconv.Atoi(m[len(m)-1][1])
					return n
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
		t.Fatal("the terminal never answered its size")
		return 0
	}
	wide := cols()
	b.do("narrow the window", chromedp.EmulateViewport(640, 900), chromedp.Sleep(500*time.Millisecond))
	narrow := cols()
	b.do("widen the window", chromedp.EmulateViewport(1280, 900))
	if wide < 80 || narrow >= wide {
		t.Errorf("terminal columns: %d at 1280 px, %d at 640 px", wide, narrow)
	}

	b.click("Restore in place to " + id)
	b.answer()
	b.wait("the undo offer", `!!document.querySelector("#undo")`, 3*time.Minute)
	b.textShown("the terminal's end", "the sandbox was restored, rolled back or stopped", 60*time.Second)
	b.shot("sandbox-restored")
	if got := alice.must("exec", "app", "--", "cat", "/f"); got != "one\n" {
		t.Errorf("/f after the restore: %q", got)
	}

	b.do("undo", chromedp.Click(chromedp.ID("undo")))
	b.wait("the undo done", `!document.querySelector("#undo") && document.body.innerText.includes("done.")`, 3*time.Minute)
	if got := alice.must("exec", "app", "--", "cat", "/f", "/g"); got != "two\nnew\n" {
		t.Errorf("/f and /g after the undo: %q", got)
	}

	// A published port shows with its URL.
	alice.must("port", "publish", "app", "8080")
	b.wait("the published port's URL", `[...document.querySelectorAll("a")].some((a) => a.textContent.startsWith("http") && a.textContent.includes("8080"))`, 30*time.Second)

	// A change made elsewhere shows without a reload.
	alice.must("stop", "app")
	b.wait("the page to show app stopped", `(document.querySelector("#sb-state") || {}).textContent === "stopped"`, 30*time.Second)
}
