package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/testenv/testregistry"
)

// buildDockerfile uses every instruction the issue lists: ARG before and
// after FROM, ENV built on the base's, WORKDIR made, COPY with --chown and
// a .dockerignore, RUN with the network (a fetch from the test's
// internet) and as a USER, CMD, EXPOSE.
const buildDockerfile = `# a comment
ARG BASE=busybox
FROM ${BASE}
ARG GREETING=hello
ENV APP_HOME=/srv/app \
    APP_MODE=built
WORKDIR $APP_HOME
COPY --chown=1000:1000 app/ ./
COPY notes.txt /etc/notes.txt
COPY . /ctx/
RUN echo "$GREETING from $(id -u)" > built.txt && wget -q -O fetched.txt http://allowed.test/ && echo step output line
RUN mkdir out && chown 1000:1000 out
USER 1000:1000
RUN id -u > out/whoami.txt
EXPOSE 9000/tcp
CMD ["sh", "-c", "cat built.txt"]
`

func writeContext(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

var stepLine = regexp.MustCompile(`Step \d+/\d+: .*`)

// fsSteps returns the "Step N/M: ..." lines of a build's output of the
// instructions that change files (and so are cached or run).
func fsSteps(out string) []string {
	var steps []string
	for _, l := range strings.Split(out, "\n") {
		if s := stepLine.FindString(l); s != "" && fsStep(s) {
			steps = append(steps, s)
		}
	}
	return steps
}

// A Dockerfile with FROM, ARG, ENV, COPY, RUN, WORKDIR, USER, CMD builds
// an image whose sandboxes hold what its steps made and run as it says;
// a second build hits the cache for every step and says so; changing a
// copied file runs again from that COPY on; a build argument changes what
// RUN does.
func TestImageBuild(t *testing.T) {
	d := startDaemon(t)
	ctxDir := t.TempDir()
	writeContext(t, ctxDir, map[string]string{
		"Dockerfile":    buildDockerfile,
		".dockerignore": "*.log\nsecret/\n",
		"app/main.sh":   "echo main v1\n",
		"notes.txt":     "notes\n",
		"debug.log":     "not sent\n",
		"secret/key":    "not sent either\n",
	})

	out, errOut, code := d.cli("", "--json", "image", "build", ctxDir, "-t", "app")
	if code != 0 {
		t.Fatalf("build: exit %d\n%s\n%s", code, out, errOut)
	}
	var img api.Image
	if err := json.Unmarshal([]byte(out), &img); err != nil || img.Name != "app" || !strings.HasPrefix(img.Digest, "sha256:") {
		t.Fatalf("built %+v (%v)", img, err)
	}
	steps := fsSteps(errOut)
	if len(steps) != 7 {
		t.Fatalf("%d steps that change files, want 7:\n%s", len(steps), errOut)
	}
	for _, s := range steps {
		if strings.Contains(s, "(cached)") {
			t.Errorf("first build: %s", s)
		}
	}
	if !strings.Contains(errOut, "| step output line") {
		t.Errorf("the RUN step's output was not streamed:\n%s", errOut)
	}
	c := img.Config
	if c == nil || c.WorkingDir != "/srv/app" || c.User != "1000:1000" || len(c.ExposedPorts) != 1 || c.ExposedPorts[0] != 9000 ||
		strings.Join(c.Cmd, " ") != "sh -c cat built.txt" || !contains(c.Env, "APP_MODE=built") {
		t.Fatalf("config %+v", c)
	}

	d.create("b1", "--image", "app")
	got := d.sh("b1", "pwd; id -u; cat built.txt; cat fetched.txt; cat main.sh; stat -c %u main.sh; cat /etc/notes.txt; cat out/whoami.txt; ls -A /ctx | sort | tr '\\n' ' '; echo; echo $APP_MODE")
	want := "/srv/app\n1000\nhello from 0\nhello from " + d.internet.Allowed.String() + "\necho main v1\n1000\nnotes\n1000\n.dockerignore Dockerfile app notes.txt \nbuilt\n"
	if got != want {
		t.Fatalf("inside a sandbox of the built image:\n%q\nwant\n%q", got, want)
	}

	// Unchanged: every step from the cache, the same image.
	out, errOut, code = d.cli("", "--json", "image", "build", ctxDir, "-t", "app")
	if code != 0 {
		t.Fatalf("second build: exit %d\n%s", code, errOut)
	}
	var again api.Image
	json.Unmarshal([]byte(out), &again)
	if again.Digest != img.Digest {
		t.Errorf("second build: digest %s, want %s", again.Digest, img.Digest)
	}
	for _, s := range fsSteps(errOut) {
		if !strings.Contains(s, "(cached)") {
			t.Errorf("second build ran a step: %s", s)
		}
	}
	if strings.Contains(errOut, "| step output line") {
		t.Errorf("second build ran the RUN step:\n%s", errOut)
	}

	// A copied file changes: the steps before that COPY are cached, it and
	// the ones after run again. (Another name: app is in use.)
	writeContext(t, ctxDir, map[string]string{"app/main.sh": "echo main v2\n"})
	_, errOut, code = d.cli("", "image", "build", ctxDir, "-t", "app-v2")
	if code != 0 {
		t.Fatalf("build after a change: exit %d\n%s", code, errOut)
	}
	for i, s := range fsSteps(errOut) {
		cached := strings.Contains(s, "(cached)")
		switch {
		case i == 0 && !cached: // WORKDIR
			t.Errorf("a step before the change ran: %s", s)
		case i > 0 && cached:
			t.Errorf("a step from the changed COPY on was cached: %s", s)
		}
	}
	d.create("b2", "--image", "app-v2")
	if got := d.sh("b2", "cat main.sh"); got != "echo main v2\n" {
		t.Errorf("after the change: %q", got)
	}
	if got := d.sh("b1", "cat main.sh"); got != "echo main v1\n" {
		t.Errorf("the first image's sandbox changed: %q", got)
	}

	// A build argument reaches RUN (and is part of its key).
	_, errOut, code = d.cli("", "image", "build", ctxDir, "-t", "app-hi", "--build-arg", "GREETING=hi")
	if code != 0 {
		t.Fatalf("build with --build-arg: exit %d\n%s", code, errOut)
	}
	d.create("b3", "--image", "app-hi")
	if got := d.sh("b3", "cat built.txt"); got != "hi from 0\n" {
		t.Errorf("with GREETING=hi: %q", got)
	}

	// Rebuilding a tag that sandboxes use is refused.
	writeContext(t, ctxDir, map[string]string{"notes.txt": "changed\n"})
	if code := d.errorCode("image", "build", ctxDir, "-t", "app"); code != api.CodeImageInUse {
		t.Errorf("rebuild of an image in use: %s, want %s", code, api.CodeImageInUse)
	}
	assertNoBuildLeftovers(t, d)
}

// fsStep reports whether a step line is of an instruction that changes
// files (and so is cached or run).
func fsStep(line string) bool {
	for _, w := range []string{": RUN ", ": COPY ", ": ADD ", ": WORKDIR "} {
		if strings.Contains(line, w) {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// assertNoBuildLeftovers checks that no build left a work subvolume, a
// received context or a container.
func assertNoBuildLeftovers(t *testing.T, d *daemon) {
	t.Helper()
	entries, _ := os.ReadDir(filepath.Join(d.dataDir, "pool", "tmp"))
	for _, e := range entries {
		t.Errorf("left in the pool's work area: %s", e.Name())
	}
	for _, c := range d.containers() {
		if strings.HasPrefix(c, "build-") {
			t.Errorf("build container left: %s", c)
		}
	}
}

// A FROM of a registry reference pulls the base (once); bad Dockerfiles
// and failing steps fail with their codes, naming the line, and leave no
// image, work subvolume or container.
func TestImageBuildFromARegistryAndFailures(t *testing.T) {
	reg := testregistry.Start(t, testregistry.Options{})
	ref := reg.Ref("team/base", "1")
	reg.Push(t, ref, testregistry.Standard(t, testregistry.WithBusybox()))
	d := startDaemon(t)

	dir := t.TempDir()
	writeContext(t, dir, map[string]string{"Dockerfile": "FROM " + ref + "\nUSER 0\nRUN cat /etc/base.conf > /copied\n"})
	_, errOut, code := d.cli("", "image", "build", dir, "-t", "frombase", "--insecure", "--network", "none")
	if code != 0 {
		t.Fatalf("build FROM a registry: exit %d\n%s", code, errOut)
	}
	d.create("fb", "--image", "frombase")
	if got := d.sh("fb", "cat /copied; echo $APP_MODE"); got != "base v2\ntest\n" {
		t.Fatalf("FROM a registry image: %q", got)
	}
	before := reg.BlobGets()
	if _, errOut, code := d.cli("", "image", "build", dir, "-t", "frombase2", "--insecure", "--network", "none"); code != 0 {
		t.Fatalf("second build: %s", errOut)
	}
	if n := reg.BlobGets() - before; n != 0 {
		t.Errorf("a second build FROM the same reference fetched %d blobs", n)
	}

	for _, tc := range []struct {
		name, dockerfile, code, says string
	}{
		{"unsupported", "FROM busybox\nRUN true\nHEALTHCHECK CMD true\n", api.CodeDockerfile, "Dockerfile:3"},
		{"multistage", "FROM busybox\nFROM busybox\n", api.CodeDockerfile, "Dockerfile:2"},
		{"nofrom", "RUN true\n", api.CodeDockerfile, ""},
		{"runfails", "FROM busybox\nRUN echo partial > /p\nRUN exit 3\n", api.CodeBuildStepFailed, "status 3"},
		{"nosource", "FROM busybox\nCOPY missing.txt /\n", api.CodeBuildStepFailed, "Dockerfile:2"},
		{"outside", "FROM busybox\nCOPY ../x /\n", api.CodeDockerfile, "Dockerfile:2"},
		{"nobase", "FROM " + reg.Ref("none/such", "1") + "\n", api.CodeNoSuchImage, "Dockerfile:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeContext(t, dir, map[string]string{"Dockerfile": tc.dockerfile})
			out, _, code := d.cli("", "--json", "image", "build", dir, "-t", "bad-"+tc.name, "--network", "none", "--insecure")
			if code == 0 {
				t.Fatalf("build succeeded: %s", out)
			}
			var eb api.ErrorBody
			if err := json.Unmarshal([]byte(out), &eb); err != nil || eb.Error.Code != tc.code || !strings.Contains(eb.Error.Message, tc.says) {
				t.Fatalf("error %+v (%v), want %s saying %q", eb.Error, err, tc.code, tc.says)
			}
			if code := d.errorCode("image", "info", "bad-"+tc.name); code != api.CodeNoImage {
				t.Errorf("image after a failed build: %s", code)
			}
		})
	}
	assertNoBuildLeftovers(t, d)
}

// cairnd killed while a RUN step runs: once it is back, nothing of the
// build is left (work subvolume, context, container, its network), the
// steps before the cut are still cached, and the same build succeeds.
func TestImageBuildCutShortByACrash(t *testing.T) {
	d := startDaemon(t)
	dir := t.TempDir()
	writeContext(t, dir, map[string]string{
		"Dockerfile": "FROM busybox\nRUN echo first > /first\nRUN test -e /slow-done || (echo started; sleep 30)\n",
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.cli("", "image", "build", dir, "-t", "cut")
	}()
	deadline := time.Now().Add(60 * time.Second)
	for !slices.ContainsFunc(d.containers(), func(c string) bool { return strings.HasPrefix(c, "build-") }) {
		if time.Now().After(deadline) {
			t.Fatal("no build container appeared")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // the second RUN under way
	d.kill(syscall.SIGKILL)
	<-done
	d.start()

	assertNoBuildLeftovers(t, d)
	if nets, _ := os.ReadDir(filepath.Join(d.dataDir, "net")); slices.ContainsFunc(nets, func(e os.DirEntry) bool { return strings.HasPrefix(e.Name(), "build-") }) {
		t.Errorf("a build step's network is left: %v", nets)
	}
	if code := d.errorCode("image", "info", "cut"); code != api.CodeNoImage {
		t.Errorf("image after a cut build: %s", code)
	}
	writeContext(t, dir, map[string]string{
		"Dockerfile": "FROM busybox\nRUN echo first > /first\nRUN test -e /slow-done || (echo quick)\n",
	})
	_, errOut, code := d.cli("", "image", "build", dir, "-t", "cut")
	if code != 0 {
		t.Fatalf("build after the crash: %s", errOut)
	}
	if steps := fsSteps(errOut); len(steps) != 2 || !strings.Contains(steps[0], "(cached)") || strings.Contains(steps[1], "(cached)") {
		t.Errorf("after the crash, steps %q: want the first cached, the second run", steps)
	}
	d.create("cut1", "--image", "cut")
	if got := d.sh("cut1", "cat /first"); got != "first\n" {
		t.Errorf("built after the crash: %q", got)
	}
}

// Sandboxes of a built and of a pulled image checkpoint, go off-site,
// restore from off-site as new and fork like any other: their files and
// their image's defaults (user, working directory, environment) come
// back.
func TestImageSandboxesCheckpointForkAndGoOffsite(t *testing.T) {
	d, _ := offsiteDaemon(t)
	reg := testregistry.Start(t, testregistry.Options{})
	ref := reg.Ref("team/app", "1")
	reg.Push(t, ref, testregistry.Standard(t, testregistry.WithBusybox()))
	d.mustCLI("image", "pull", ref, "--insecure", "--name", "pulled")

	dir := t.TempDir()
	writeContext(t, dir, map[string]string{
		"Dockerfile": "FROM busybox\nENV APP_MODE=built\nWORKDIR /srv\nCOPY data.txt .\nRUN chown -R 1000:1000 /srv\nUSER 1000:1000\n",
		"data.txt":   "from the context\n",
	})
	d.mustCLI("image", "build", dir, "-t", "built", "--network", "none")

	for _, tc := range []struct{ image, home, mode string }{{"built", "/srv", "built"}, {"pulled", "/home/app", "test"}} {
		t.Run(tc.image, func(t *testing.T) {
			sb := "of-" + tc.image
			d.create(sb, "--image", tc.image)
			d.sh(sb, "echo mine > mine.txt")
			ck := d.checkpoint(sb)
			d.waitOffsite(sb, ck.ID, "uploaded ×2", 2*time.Minute)
			d.sh(sb, "rm mine.txt")
			d.mustCLI("checkpoint", "restore", sb, ck.ID, "--as", sb+"-copy", "--from-offsite")
			d.mustCLI("fork", sb+"-copy", "--count", "1", "--name-prefix", sb+"-f")
			want := "mine\n1000\n" + tc.home + "\n" + tc.mode + "\n"
			for _, name := range []string{sb + "-copy", sb + "-f-1"} {
				if got := d.sh(name, "cat mine.txt; id -u; pwd; echo $APP_MODE"); got != want {
					t.Errorf("%s: %q, want %q", name, got, want)
				}
			}
		})
	}
}
