package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// The python and node images, asked for at once in one cairnd: debian is
// built once for both (the other request waits for it), each is debian and
// Debian's packages installed on top, and their sandboxes run Python with
// pip and venv, Node.js with npm, and git. The image list shows them ready
// with a description; the builds leave nothing mounted, nothing in the
// pool's work area, no package files or apt caches in the images, and the
// packages in cairnd's cache for the next build.
func TestBuiltinPythonAndNode(t *testing.T) {
	d := startDaemon(t)
	type created struct {
		image, stderr string
		err           error
		took          time.Duration
	}
	sandboxes := map[string]string{"python": "py", "node": "nd"}
	done := make(chan created, len(sandboxes))
	start := time.Now()
	for image, sb := range sandboxes {
		go func() {
			// Not d.cli: that may end the test, which only its own goroutine can.
			began := time.Now()
			cmd := exec.Command(filepath.Join(binDir, "cairn"), "--socket", d.socket, "create", sb, "--image", image)
			var errOut bytes.Buffer
			cmd.Stderr = &errOut
			err := cmd.Run()
			done <- created{image, errOut.String(), err, time.Since(began)}
		}()
	}
	var progress string
	for range sandboxes {
		c := <-done
		if c.err != nil {
			t.Fatalf("create from %s: %v\n%s", c.image, c.err, c.stderr)
		}
		t.Logf("create from %s: %v", c.image, c.took.Round(time.Second))
		if !strings.Contains(c.stderr, "Image "+c.image+" starts from image debian") || !strings.Contains(c.stderr, "Image "+c.image+" ready") {
			t.Errorf("create from %s reported:\n%s", c.image, c.stderr)
		}
		progress += c.stderr
	}
	t.Logf("both images built and their sandboxes started in %v", time.Since(start).Round(time.Second))
	if n := strings.Count(progress, "Building image debian\n"); n != 1 {
		t.Errorf("debian built %d times for python and node, want once", n)
	}

	if got := d.sh("py", "python3 -c 'import sys; print(sys.version)'"); !strings.HasPrefix(got, "3.11.") {
		t.Errorf("python3 sys.version: %q", got)
	}
	if got := d.sh("py", "python3 -m venv /root/v && /root/v/bin/pip --version"); !strings.HasPrefix(got, "pip ") || !strings.Contains(got, "/root/v/") {
		t.Errorf("pip of a new venv: %q", got)
	}
	if got := d.sh("nd", "node -e 'console.log(1+1)'"); got != "2\n" {
		t.Errorf("node: %q", got)
	}
	if got := strings.TrimSpace(d.sh("nd", "npm --version")); got == "" || strings.Trim(got, "0123456789.") != "" {
		t.Errorf("npm --version: %q", got)
	}
	for _, sb := range []string{"py", "nd"} {
		if got := d.sh(sb, "git --version"); !strings.HasPrefix(got, "git version 2.") {
			t.Errorf("git in %s: %q", sb, got)
		}
	}

	var imgs []api.Image
	if err := json.Unmarshal([]byte(d.mustCLI("--json", "image", "list")), &imgs); err != nil {
		t.Fatal(err)
	}
	ready := map[string]bool{}
	for _, img := range imgs {
		if img.Description == "" {
			t.Errorf("image %s has no description", img.Name)
		}
		ready[img.Name] = img.Ready
	}
	for _, name := range []string{"busybox", "debian", "python", "node"} {
		if _, ok := ready[name]; !ok {
			t.Errorf("image list has no %s: %+v", name, imgs)
		}
	}
	if !ready["debian"] || !ready["python"] || !ready["node"] {
		t.Errorf("image list: %+v, want debian, python and node ready", imgs)
	}

	pool := filepath.Join(d.dataDir, "pool")
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], pool+"/") {
			t.Errorf("mounted after the builds: %s", f[4])
		}
	}
	if left, _ := filepath.Glob(filepath.Join(pool, "tmp", "image-*")); len(left) > 0 {
		t.Errorf("work subvolumes left: %q", left)
	}
	for _, image := range []string{"debian", "python", "node"} {
		root := filepath.Join(pool, "images", image)
		for _, pattern := range []string{"var/cache/apt/archives/*.deb", "var/cache/apt/*.bin", "usr/sbin/policy-rc.d"} {
			if left, _ := filepath.Glob(filepath.Join(root, pattern)); len(left) > 0 {
				t.Errorf("image %s has %q", image, left)
			}
		}
	}
	for _, image := range []string{"python", "node"} {
		if debs, _ := filepath.Glob(filepath.Join(testCacheDir, "apt", image, "*.deb")); len(debs) < 10 {
			t.Errorf("%d packages of %s in the cache, want the build's", len(debs), image)
		}
	}
}
