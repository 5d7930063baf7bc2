package initd_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/agent"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/initd"
)

// svcEnv is a services dir and a log dir for one test.
type svcEnv struct {
	dir, logs string
}

// newServices writes the definitions files (file name → content) into a
// new services dir.
func newServices(t *testing.T, files map[string]string) svcEnv {
	t.Helper()
	e := svcEnv{dir: t.TempDir(), logs: filepath.Join(t.TempDir(), "log", "cairn")}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(e.dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func (e svcEnv) config() initd.Config {
	return initd.Config{ServicesDir: e.dir, LogDir: e.logs}
}

// log returns what the log of service name holds.
func (e svcEnv) log(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.logs, name+".log"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}

// service writes a definition as JSON.
func service(name string, cmd []string, restart string) string {
	q := make([]string, len(cmd))
	for i, a := range cmd {
		q[i] = fmt.Sprintf("%q", a)
	}
	return fmt.Sprintf(`{"name":%q,"cmd":[%s],"restart":%q}`, name, strings.Join(q, ","), restart)
}

// statuses returns the services h reports, by name.
func statuses(t *testing.T, h *agent.Host) map[string]api.ServiceStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := h.Services(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]api.ServiceStatus)
	for _, s := range list {
		m[s.Name] = s
	}
	return m
}

// eventually polls cond until it holds, failing the test after 10 s with
// what cond last said.
func eventually(t *testing.T, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var startedLine = regexp.MustCompile(`(?m)^--- cairn: started pid (\d+) at (\S+)$`)

func TestServicesStartAtBoot(t *testing.T) {
	e := newServices(t, map[string]string{
		"web.json": `{"name":"web","cmd":["sh","-c","echo \"$GREETING $BASE $PATH\"; pwd; echo err >&2; exec sleep 30"],
			"env":{"GREETING":"hello"},"dir":"/tmp"}`,
		"worker.json": service("worker", []string{"sleep", "30"}, "always"),
	})
	cfg := e.config()
	cfg.Env = []string{"BASE=base", "GREETING=base"}
	h := startWith(t, cfg)

	st := statuses(t, h)
	if len(st) != 2 {
		t.Fatalf("services: %+v", st)
	}
	for name, restart := range map[string]string{"web": "on-failure", "worker": "always"} {
		s := st[name]
		if s.State != api.ServiceRunning || s.PID <= 0 || s.Restarts != 0 || s.ExitCode != nil ||
			s.Restart != restart || s.Since.IsZero() || time.Since(s.Since) > time.Minute || s.Error != "" {
			t.Errorf("%s: %+v", name, s)
		}
		if pgid, err := unix.Getpgid(s.PID); pgid != s.PID {
			t.Errorf("%s: process group %d, %v; want its own", name, pgid, err)
		}
	}
	if !slices.Equal(st["worker"].Cmd, []string{"sleep", "30"}) {
		t.Errorf("worker cmd: %q", st["worker"].Cmd)
	}

	want := "hello base /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/.cairn/bin\n/tmp\nerr\n"
	eventually(t, func() (bool, string) {
		log := e.log(t, "web")
		return strings.HasSuffix(log, want), fmt.Sprintf("web log %q", log)
	})
	log := e.log(t, "web")
	m := startedLine.FindStringSubmatch(log)
	if m == nil || log != m[0]+"\n"+want || m[1] != fmt.Sprint(st["web"].PID) {
		t.Errorf("web log %q", log)
	} else if _, err := time.Parse(time.RFC3339, m[2]); err != nil {
		t.Errorf("start time: %v", err)
	}
}

// restartLines returns the delays of the "restarting in" lines of log.
func restartLines(log string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^--- cairn: restarting in (\S+)$`).FindAllStringSubmatch(log, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestServiceRestartPolicies(t *testing.T) {
	e := newServices(t, map[string]string{
		"always0.json": service("always0", []string{"sh", "-c", "echo run"}, "always"),
		"onfail0.json": service("onfail0", []string{"sh", "-c", "echo run"}, "on-failure"),
		"onfail1.json": `{"name":"onfail1","cmd":["sh","-c","echo run; exit 1"]}`, // the default policy
		"no1.json":     service("no1", []string{"sh", "-c", "echo run; exit 1"}, "no"),
		"no0.json":     service("no0", []string{"true"}, "no"),
		"killed.json":  service("killed", []string{"sh", "-c", "kill -KILL $$"}, "no"),
	})
	cfg := e.config()
	cfg.Backoff = initd.Backoff{First: 50 * time.Millisecond, Max: 200 * time.Millisecond, Reset: time.Minute}
	h := startWith(t, cfg)

	eventually(t, func() (bool, string) {
		st := statuses(t, h)
		return st["always0"].Restarts >= 4 && st["onfail1"].Restarts >= 4, fmt.Sprintf("%+v", st)
	})
	st := statuses(t, h)
	for name, want := range map[string]struct {
		state string
		code  int
	}{
		"onfail0": {api.ServiceExited, 0},
		"no1":     {api.ServiceFailed, 1},
		"no0":     {api.ServiceExited, 0},
		"killed":  {api.ServiceFailed, 137},
	} {
		s := st[name]
		if s.State != want.state || s.ExitCode == nil || *s.ExitCode != want.code || s.Restarts != 0 || s.PID != 0 {
			t.Errorf("%s: %+v (code %v), want %s with code %d", name, s, s.ExitCode, want.state, want.code)
		}
	}
	for _, name := range []string{"always0", "onfail1"} {
		if s := st[name]; s.State != api.ServiceRunning && s.State != api.ServiceBackoff {
			t.Errorf("%s: %+v", name, s)
		}
	}

	// The backoff doubles up to its maximum.
	for _, name := range []string{"always0", "onfail1"} {
		if got := restartLines(e.log(t, name)); !slices.Equal(got[:4], []string{"50ms", "100ms", "200ms", "200ms"}) {
			t.Errorf("%s restarts: %q", name, got)
		}
	}
	if log := e.log(t, "no1"); !regexp.MustCompile(`^--- cairn: started pid \d+ at \S+\nrun\n--- cairn: exited with code 1\n$`).MatchString(log) {
		t.Errorf("no1 log %q", log)
	}
	if log := e.log(t, "killed"); !strings.HasSuffix(log, "\n--- cairn: exited with code 137 (SIGKILL)\n") {
		t.Errorf("killed log %q", log)
	}
	log := e.log(t, "always0")
	if !strings.Contains(log, "run\n--- cairn: exited with code 0\n--- cairn: restarting in 50ms\n--- cairn: started pid ") {
		t.Errorf("always0 log %q", log)
	}
	if n, r := len(startedLine.FindAllString(log, -1)), statuses(t, h)["always0"].Restarts; n < r || n > r+1 {
		t.Errorf("always0: %d starts logged, %d restarts reported", n, r)
	}
}

// A service that ran for Backoff.Reset waits Backoff.First again.
func TestServiceBackoffResets(t *testing.T) {
	e := newServices(t, map[string]string{
		"slow.json": service("slow", []string{"sh", "-c", "sleep 0.25; exit 1"}, "on-failure"),
	})
	cfg := e.config()
	cfg.Backoff = initd.Backoff{First: 50 * time.Millisecond, Max: time.Second, Reset: 200 * time.Millisecond}
	h := startWith(t, cfg)
	eventually(t, func() (bool, string) {
		s := statuses(t, h)["slow"]
		return s.Restarts >= 2, fmt.Sprintf("%+v", s)
	})
	if got := restartLines(e.log(t, "slow")); len(got) < 2 || got[0] != "50ms" || got[1] != "50ms" {
		t.Errorf("restarts: %q", got)
	}
}

func TestServiceCannotStart(t *testing.T) {
	e := newServices(t, map[string]string{
		"once.json":  service("once", []string{"nosuch"}, "no"),
		"again.json": service("again", []string{"nosuch"}, "always"),
		"dir.json":   `{"name":"dir","cmd":["true"],"dir":"/nonexistent","restart":"no"}`,
	})
	cfg := e.config()
	cfg.Backoff = initd.Backoff{First: 20 * time.Millisecond, Max: 20 * time.Millisecond}
	h := startWith(t, cfg)
	eventually(t, func() (bool, string) {
		s := statuses(t, h)["again"]
		return s.Restarts >= 2, fmt.Sprintf("%+v", s)
	})
	st := statuses(t, h)
	for name, want := range map[string]string{
		"once": `exec: "nosuch": executable file not found in $PATH`,
		"dir":  `exec: dir "/nonexistent": no such file or directory`,
	} {
		if s := st[name]; s.State != api.ServiceFailed || s.Error != want || s.ExitCode != nil || s.PID != 0 {
			t.Errorf("%s: %+v", name, s)
		}
		if log := e.log(t, name); log != "--- cairn: cannot start: "+want+"\n" {
			t.Errorf("%s log %q", name, log)
		}
	}
	if s := st["again"]; s.State != api.ServiceBackoff && s.State != api.ServiceRunning {
		t.Errorf("again: %+v", s)
	}
}

func TestBadServiceFilesAreSkipped(t *testing.T) {
	e := newServices(t, map[string]string{
		"a.json":       service("good", []string{"sleep", "30"}, "no"),
		"b.json":       "not json",
		"c.json":       `{"name":"Bad Name","cmd":["sleep","30"]}`,
		"d.json":       `{"name":"other","cmd":["sleep","30"],"restrat":"no"}`,
		"e.json":       service("good", []string{"sleep", "31"}, "no"), // the name is taken
		".hidden.json": service("hidden", []string{"sleep", "30"}, "no"),
		"notes.txt":    service("notes", []string{"sleep", "30"}, "no"),
		"z.json":       service("last", []string{"sleep", "30"}, "no"),
	})
	if err := unix.Mkfifo(filepath.Join(e.dir, "fifo.json"), 0o644); err != nil { // must not hang the boot
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(e.dir, "sub.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := startWith(t, e.config())
	st := statuses(t, h)
	if len(st) != 2 || st["good"].State != api.ServiceRunning || st["last"].State != api.ServiceRunning ||
		!slices.Equal(st["good"].Cmd, []string{"sleep", "30"}) {
		t.Errorf("services: %+v", st)
	}
}

func TestServiceLogs(t *testing.T) {
	e := newServices(t, map[string]string{
		"web.json":   service("web", []string{"sh", "-c", "echo 0123456789; exec sleep 30"}, "no"),
		"big.json":   service("big", []string{"sh", "-c", "head -c 1100000 /dev/zero | tr '\\0' x; echo end; exec sleep 30"}, "no"),
		"other.json": service("other", []string{"true"}, "no"),
	})
	h := startWith(t, e.config())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	eventually(t, func() (bool, string) {
		return strings.HasSuffix(e.log(t, "web"), "0123456789\n") && strings.HasSuffix(e.log(t, "big"), "end\n") &&
			statuses(t, h)["other"].State == api.ServiceExited, "waiting for the logs"
	})

	if b, err := h.ServiceLogs(ctx, "web", 11); string(b) != "0123456789\n" || err != nil {
		t.Errorf("tail 11: %q, %v", b, err)
	}
	if b, err := h.ServiceLogs(ctx, "web", 0); string(b) != e.log(t, "web") || err != nil { // smaller than the default
		t.Errorf("default tail: %q, %v", b, err)
	}
	b, err := h.ServiceLogs(ctx, "big", 10<<20)
	if err != nil || len(b) != api.MaxLogTail || !strings.HasSuffix(string(b), "xxxend\n") {
		t.Errorf("big tail: %d bytes, %q…, %v", len(b), b[max(len(b)-10, 0):], err)
	}
	if b, err := h.ServiceLogs(ctx, "big", 0); err != nil || len(b) != api.DefaultLogTail {
		t.Errorf("big default tail: %d bytes, %v", len(b), err)
	}

	if _, err := h.ServiceLogs(ctx, "../x", 0); !errdefs.Is(err, api.CodeInvalidArgument) {
		t.Errorf("../x: %v", err)
	}
	var nse *agent.NoServiceError
	if _, err := h.ServiceLogs(ctx, "nosuch", 0); !errors.As(err, &nse) || err.Error() != `no service "nosuch"` {
		t.Errorf("nosuch: %v", err)
	}

	// The log is read inside the sandbox, and not through a symbolic link.
	path := filepath.Join(e.logs, "other.log")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if b, err := h.ServiceLogs(ctx, "other", 0); len(b) != 0 || err != nil {
		t.Errorf("no log: %q, %v", b, err)
	}
	if err := os.Symlink("/etc/passwd", path); err != nil {
		t.Fatal(err)
	}
	if b, err := h.ServiceLogs(ctx, "other", 0); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("log through a symbolic link: %q, %v", b, err)
	}
}

// stopping starts cairn-init with services and returns a Host connected to
// it and what tells when Run returned.
func stopping(t *testing.T, e svcEnv) (*agent.Host, *running) {
	t.Helper()
	sock := socketPath(t)
	h, err := agent.Listen(sock, keyFile(t, sock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	cfg := e.config()
	cfg.SocketPath = sock
	cfg.TermGrace = 300 * time.Millisecond
	cfg.Backoff = initd.Backoff{First: time.Minute} // "waiting" waits until the end
	r := startInit(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	return h, r
}

var stoppingServices = map[string]string{
	"polite.json":   service("polite", []string{"sleep", "30"}, "always"),
	"stubborn.json": service("stubborn", []string{"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"}, "always"),
	"waiting.json":  `{"name":"waiting","cmd":["false"]}`,
}

// checkStopped checks that the services were stopped and not restarted.
func checkStopped(t *testing.T, e svcEnv, before map[string]api.ServiceStatus) {
	t.Helper()
	for name, code := range map[string]string{"polite": "143 (SIGTERM)", "stubborn": "137 (SIGKILL)"} {
		waitGone(t, before[name].PID)
		log := e.log(t, name)
		if n := len(startedLine.FindAllString(log, -1)); n != 1 || !strings.HasSuffix(log, "--- cairn: exited with code "+code+"\n") {
			t.Errorf("%s: %d starts, log %q", name, n, log)
		}
	}
	if log := e.log(t, "waiting"); len(startedLine.FindAllString(log, -1)) != 1 {
		t.Errorf("waiting restarted: %q", log)
	}
}

func TestShutdownStopsServices(t *testing.T) {
	e := newServices(t, stoppingServices)
	h, r := stopping(t, e)
	eventually(t, func() (bool, string) {
		st := statuses(t, h)
		return strings.HasSuffix(e.log(t, "stubborn"), "ready\n") && st["waiting"].State == api.ServiceBackoff,
			fmt.Sprintf("%+v", st)
	})
	before := statuses(t, h)
	// Shutdown syncs every file system, slow on a busy machine; but it does
	// not wait the minute of the backoff of "waiting".
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Shutdown(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		t.Fatal("cairn-init did not exit")
	}
	checkStopped(t, e, before)
}

func TestSIGTERMStopsServices(t *testing.T) {
	e := newServices(t, stoppingServices)
	h, r := stopping(t, e)
	eventually(t, func() (bool, string) {
		return strings.HasSuffix(e.log(t, "stubborn"), "ready\n"), "stubborn not ready"
	})
	before := statuses(t, h)
	if err := unix.Kill(os.Getpid(), unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		t.Fatal("cairn-init did not exit")
	}
	checkStopped(t, e, before)
}

// When Run's context ends, it stops its services too.
func TestRunEndStopsServices(t *testing.T) {
	e := newServices(t, map[string]string{"s.json": service("s", []string{"sleep", "30"}, "always")})
	sock := socketPath(t)
	h, err := agent.Listen(sock, keyFile(t, sock))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cfg := e.config()
	cfg.SocketPath = sock
	cfg.Key = keyOf(t, sock)
	go func() { done <- initd.Run(ctx, cfg) }()
	var pid int
	eventually(t, func() (bool, string) {
		pid = statuses(t, h)["s"].PID
		return pid != 0, "not running"
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	if log := e.log(t, "s"); !strings.HasSuffix(log, "--- cairn: exited with code 143 (SIGTERM)\n") {
		t.Errorf("log %q", log)
	}
}
