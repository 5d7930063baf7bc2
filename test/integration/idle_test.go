package integration

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// --idle: unused for its idle time, a sandbox sleeps (its session saved,
// its container gone, so no host memory); an exec wakes it and a process
// that was running goes on counting where it was.
func TestSandboxSleepsWhenIdle(t *testing.T) {
	d := startDaemon(t)
	sb := d.create("nap", "--network", "none", "--idle", "4s")
	if sb.IdleSeconds != 4 {
		t.Fatalf("idle seconds %d, want 4", sb.IdleSeconds)
	}
	d.mustCLI("exec", "nap", "--detach", "--", "sh", "-c", "i=0; while :; do i=$((i+1)); echo $i > /tmp/n; sleep 0.1; done")
	time.Sleep(time.Second)
	before, _ := strconv.Atoi(strings.TrimSpace(d.sh("nap", "cat /tmp/n")))

	asleep := d.waitState("nap", api.StateSleeping, 30*time.Second)
	if asleep.SavedSession == "" {
		t.Fatalf("asleep without a saved session: %+v", asleep)
	}
	for _, c := range d.containers() {
		if strings.HasPrefix(c, sb.ID) {
			t.Fatalf("the sleeping sandbox's container %s still runs: its memory is not freed", c)
		}
	}

	start := time.Now()
	out := d.sh("nap", "cat /tmp/n; sleep 0.5; cat /tmp/n")
	t.Logf("an exec woke the sandbox in %v", time.Since(start))
	f := strings.Fields(out)
	if len(f) != 2 {
		t.Fatalf("exec after the sleep: %q", out)
	}
	woke, _ := strconv.Atoi(f[0])
	later, _ := strconv.Atoi(f[1])
	if woke < before || later <= woke {
		t.Fatalf("the counter read %d before the sleep, %d and %d after: its process did not go on", before, woke, later)
	}
	if st := d.info("nap").State; st != api.StateRunning {
		t.Fatalf("after the exec: %s, want running", st)
	}
	// Unused again, it sleeps again; a look at its services is a use of
	// it too, and wakes it.
	d.waitState("nap", api.StateSleeping, 30*time.Second)
	d.mustCLI("services", "nap")
	if st := d.info("nap").State; st != api.StateRunning {
		t.Fatalf("after cairn services: %s, want running", st)
	}
	d.waitState("nap", api.StateSleeping, 30*time.Second)
	d.mustCLI("start", "nap")
	if st := d.info("nap").State; st != api.StateRunning {
		t.Fatalf("start of a sleeping sandbox: %s", st)
	}
}

// An HTTP request to a published port of a sleeping sandbox wakes it and
// is answered by the server that was running in it.
func TestSleepingSandboxWokenByItsPort(t *testing.T) {
	d := startDaemon(t)
	d.create("site", "--idle", "3s")
	d.webServer("site")
	p := d.publish("site")
	tok := d.portToken()
	d.waitState("site", api.StateSleeping, 30*time.Second)
	start := time.Now()
	code, body := viaProxy(t, p.URL, tok)
	if code != 200 || !strings.Contains(body, "page of site") {
		t.Fatalf("GET %s of the sleeping sandbox: %d %q", p.URL, code, body)
	}
	t.Logf("the request woke the sandbox and was answered in %v", time.Since(start))
	if st := d.info("site").State; st != api.StateRunning {
		t.Fatalf("after the request: %s, want running", st)
	}
}
