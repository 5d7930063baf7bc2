package integration

import (
	"archive/tar"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/testenv/testregistry"
)

// An image pulled from a registry on loopback (one that wants
// credentials) holds every file and attribute its layers make, whiteouts
// and opaque directories applied; its sandboxes run as its user, in its
// working directory, with its environment; they checkpoint, restore as
// new and fork as any other; a second pull of its digest fetches no layer;
// an image in use is not deleted.
func TestImagePullFromARegistry(t *testing.T) {
	reg := testregistry.Start(t, testregistry.Options{Username: "puller", Password: "s3cret"})
	ref := reg.Ref("team/app", "1")
	digest := reg.Push(t, ref, testregistry.Standard(t, testregistry.WithBusybox()))
	d := startDaemon(t)

	// Credentials: refused without, and with wrong ones.
	if code := d.errorCode("image", "pull", ref, "--insecure", "--name", "app"); code != api.CodeRegistryDenied {
		t.Fatalf("pull without credentials: %s, want %s", code, api.CodeRegistryDenied)
	}
	if _, _, code := d.cli("wrong\n", "image", "pull", ref, "--insecure", "--name", "app", "--username", "puller", "--password-stdin"); code == 0 {
		t.Fatal("pull with a wrong password succeeded")
	}
	out, errOut, code := d.cli("s3cret\n", "--json", "image", "pull", ref, "--insecure", "--name", "app", "--username", "puller", "--password-stdin")
	if code != 0 {
		t.Fatalf("pull: exit %d: %s", code, errOut)
	}
	var img api.Image
	if err := json.Unmarshal([]byte(out), &img); err != nil || img.Name != "app" || img.Digest != digest || img.Source != ref || !img.Ready {
		t.Fatalf("pulled %+v (%v), want app at %s", img, err, digest)
	}
	if c := img.Config; c == nil || c.WorkingDir != "/home/app" || c.User != "1000:1000" || len(c.ExposedPorts) != 1 || c.ExposedPorts[0] != 8080 {
		t.Fatalf("config %+v", img.Config)
	}
	if !strings.Contains(errOut, "Layer 4/4") {
		t.Errorf("no layer progress on stderr: %q", errOut)
	}
	// Every file as its layers make it, on the host's copy of the image,
	// and the directories cairn gives every root.
	want := standardAsImage(t)
	want.Check(t, filepath.Join(d.dataDir, "pool", "images", "app"))

	// The same digest again, under another name: no blob fetched.
	before := reg.BlobGets()
	d.cli("s3cret\n", "image", "pull", ref, "--insecure", "--name", "app-again", "--username", "puller", "--password-stdin")
	if got := d.mustCLI("--json", "image", "info", "app-again"); !strings.Contains(got, digest) {
		t.Fatalf("second name: %s", got)
	}
	if n := reg.BlobGets() - before; n != 0 {
		t.Errorf("a second pull of the same digest fetched %d blobs", n)
	}

	// A sandbox of it runs as the image says.
	d.create("app1", "--image", "app")
	if got := d.sh("app1", "id -u; id -g; pwd; echo $APP_MODE; stat -c '%a %u' /usr/bin/suid; cat file; ls /opt/old"); got != "1000\n1000\n/home/app\ntest\n4755 0\napp file\nb\n" {
		t.Fatalf("inside the sandbox: %q", got)
	}
	if got := d.mustCLI("exec", "app1", "--user", "0", "-w", "/", "--", "sh", "-c", "id -u; pwd; cat /etc/base.conf"); got != "0\n/\nbase v2\n" {
		t.Fatalf("exec --user 0 -w /: %q", got)
	}
	// Checkpoint, restore as new, fork: the same files and defaults.
	d.sh("app1", "echo mine > /home/app/mine")
	ck := d.checkpoint("app1")
	d.sh("app1", "rm /home/app/mine")
	d.mustCLI("checkpoint", "restore", "app1", ck.ID, "--as", "app2")
	if got := d.sh("app2", "cat /home/app/mine; id -u; pwd"); got != "mine\n1000\n/home/app\n" {
		t.Fatalf("restored as new: %q", got)
	}
	d.mustCLI("fork", "app2", "--count", "1", "--name-prefix", "appf")
	if got := d.sh("appf-1", "cat /home/app/mine; echo $APP_MODE"); got != "mine\ntest\n" {
		t.Fatalf("fork: %q", got)
	}

	// In use: refused; once nothing uses it, deleted with its files.
	if code := d.errorCode("image", "delete", "app"); code != api.CodeImageInUse {
		t.Fatalf("delete of an image in use: %s, want %s", code, api.CodeImageInUse)
	}
	d.mustCLI("image", "delete", "app-again")
	if _, err := os.Stat(filepath.Join(d.dataDir, "pool", "images", "app-again")); !os.IsNotExist(err) {
		t.Errorf("app-again's files after its delete: %v", err)
	}
	if code := d.errorCode("image", "info", "app-again"); code != api.CodeNoImage {
		t.Errorf("info of a deleted image: %s", code)
	}
}

// A damaged layer, a config whose diff id does not match, an unknown tag
// and a taken name each fail with their code and leave nothing.
func TestImagePullFailuresLeaveNothing(t *testing.T) {
	reg := testregistry.Start(t, testregistry.Options{})
	d := startDaemon(t)
	img := testregistry.Standard(t)

	corrupt := reg.Ref("bad/corrupt", "1")
	reg.Push(t, corrupt, img)
	reg.CorruptBlob(testregistry.LayerDigests(t, img)[1])
	wrongDiff := reg.Ref("bad/diffid", "1")
	other := testregistry.Image(t, testregistry.Config{}, testregistry.Layer(t, testregistry.File("x", "y\n", 0o644)))
	reg.Push(t, wrongDiff, testregistry.WrongDiffID(t, other, 0))

	for _, tc := range []struct {
		ref, name, code string
	}{
		{corrupt, "corrupt", api.CodeImageDamaged},
		{wrongDiff, "diffid", api.CodeImageDamaged},
		{reg.Ref("bad/none", "nope"), "none", api.CodeNoSuchImage},
		{"127.0.0.1:1/x/y:1", "unreachable", api.CodeRegistryFailed},
		{"not a ref", "x", api.CodeInvalidArgument},
		{reg.Ref("bad/diffid", "1"), "busybox", api.CodeImageExists},
	} {
		out, _, _ := d.cli("", "--json", "image", "pull", tc.ref, "--insecure", "--name", tc.name)
		var eb api.ErrorBody
		if json.Unmarshal([]byte(out), &eb); eb.Error.Code != tc.code {
			t.Errorf("pull %s as %s: %s (%s), want %s", tc.ref, tc.name, eb.Error.Code, eb.Error.Message, tc.code)
		}
		if tc.name != "busybox" {
			if _, err := os.Stat(filepath.Join(d.dataDir, "pool", "images", tc.name)); !os.IsNotExist(err) {
				t.Errorf("%s: its files are left: %v", tc.name, err)
			}
		}
	}
	if left, _ := filepath.Glob(filepath.Join(d.dataDir, "pool", "tmp", "pull-*")); len(left) > 0 {
		t.Errorf("work subvolumes left: %v", left)
	}
	var imgs []api.Image
	json.Unmarshal([]byte(d.mustCLI("--json", "image", "list")), &imgs)
	for _, i := range imgs {
		if i.Digest != "" {
			t.Errorf("an image recorded after failed pulls: %+v", i)
		}
	}
}

// An image that adds a layer to one pulled fetches only that layer
// (the layer cache) and runs; `cairn image prune` empties the cache,
// after which a pull fetches every layer again, and the images stay.
func TestImagePullLayerCacheAndPrune(t *testing.T) {
	reg := testregistry.Start(t, testregistry.Options{})
	d := startDaemon(t)
	base := testregistry.Standard(t, testregistry.WithBusybox())
	reg.Push(t, reg.Ref("team/base", "1"), base)
	layers, err := base.Layers()
	if err != nil {
		t.Fatal(err)
	}
	top := testregistry.Layer(t, testregistry.File("/home/app/added", "added\n", 0o644))
	more := testregistry.Image(t, testregistry.StandardConfig(), append(layers, top)...)
	reg.Push(t, reg.Ref("team/more", "1"), more)
	d.mustCLI("image", "pull", reg.Ref("team/base", "1"), "--name", "base")

	before := reg.BlobGets()
	_, errOut, code := d.cli("", "image", "pull", reg.Ref("team/more", "1"), "--name", "more")
	if code != 0 {
		t.Fatalf("pull: exit %d: %s", code, errOut)
	}
	if n := reg.BlobGets() - before; n != 2 { // its config and its top layer
		t.Errorf("a pull that adds a layer fetched %d blobs, want 2", n)
	}
	if !strings.Contains(errOut, "Layer 4/5 ") || !strings.Contains(errOut, ": cached\n") {
		t.Errorf("no cached layers in the progress: %q", errOut)
	}
	d.create("more1", "--image", "more")
	if got := d.sh("more1", "cat added file"); got != "added\napp file\n" {
		t.Fatalf("inside: %q", got)
	}

	var res api.PruneImagesResult
	if err := json.Unmarshal([]byte(d.mustCLI("--json", "image", "prune")), &res); err != nil || res.Removed == 0 {
		t.Fatalf("prune: %+v, %v", res, err)
	}
	if left, _ := filepath.Glob(filepath.Join(d.dataDir, "pool", "cache", "layers-*")); len(left) > 0 {
		t.Errorf("cache entries after the prune: %v", left)
	}
	if got := d.sh("more1", "cat added"); got != "added\n" {
		t.Fatalf("the sandbox after the prune: %q", got)
	}
	again := testregistry.Image(t, testregistry.Config{Env: []string{"X=1"}}, append(layers, top)...)
	reg.Push(t, reg.Ref("team/again", "1"), again)
	before = reg.BlobGets()
	d.mustCLI("image", "pull", reg.Ref("team/again", "1"), "--name", "again")
	if n := reg.BlobGets() - before; n != 6 {
		t.Errorf("after the prune, a pull fetched %d blobs, want 6 (config and 5 layers)", n)
	}
}

// Images import from a docker save tar (also gzipped, also on standard
// input), an OCI layout tar and an OCI layout directory, each with every
// file of the reference image; an archive that is not an image, or a
// layout tar with a name out of its layout, is I06 and leaves nothing.
func TestImageImport(t *testing.T) {
	d := startDaemon(t)
	img := testregistry.Standard(t, testregistry.WithBusybox())
	dir := t.TempDir()
	save := filepath.Join(dir, "save.tar")
	testregistry.WriteDockerSave(t, save, "example.com/app:1", img)
	layoutTar := filepath.Join(dir, "layout.tar")
	testregistry.WriteOCILayoutTar(t, layoutTar, "app:1", img)
	layoutDir := filepath.Join(dir, "layout")
	testregistry.WriteOCILayout(t, layoutDir, "app:1", img)
	gz := filepath.Join(dir, "save.tar.gz")
	if out, err := exec.Command("sh", "-c", "gzip -c "+save+" > "+gz).CombinedOutput(); err != nil {
		t.Fatalf("gzip: %v %s", err, out)
	}

	want := standardAsImage(t)
	for _, tc := range []struct{ name, path, stdin string }{
		{"from-save", save, ""},
		{"from-layout-tar", layoutTar, ""},
		{"from-layout-dir", layoutDir, ""},
		{"from-gzip", gz, ""},
	} {
		out, errOut, code := d.cli("", "--json", "image", "import", tc.path, "--name", tc.name)
		if code != 0 {
			t.Fatalf("import %s: exit %d: %s", tc.path, code, errOut)
		}
		var got api.Image
		if err := json.Unmarshal([]byte(out), &got); err != nil || got.Config == nil || got.Config.User != "1000:1000" || !strings.HasPrefix(got.Source, "import:") {
			t.Fatalf("import %s: %+v %v", tc.path, got, err)
		}
		want.Check(t, filepath.Join(d.dataDir, "pool", "images", tc.name))
	}
	raw, _ := os.ReadFile(save)
	if _, errOut, code := d.cli(string(raw), "image", "import", "-", "--name", "from-stdin"); code != 0 {
		t.Fatalf("import from stdin: %s", errOut)
	}
	d.create("imported", "--image", "from-layout-tar")
	if got := d.sh("imported", "id -u; pwd; echo $APP_MODE"); got != "1000\n/home/app\ntest\n" {
		t.Fatalf("a sandbox of an imported image: %q", got)
	}

	// Not images.
	notImage := filepath.Join(dir, "not.tar")
	if out, err := exec.Command("tar", "-cf", notImage, "-C", dir, "save.tar.gz").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}
	evil := filepath.Join(dir, "evil.tar")
	f, _ := os.Create(evil)
	tw := tar.NewWriter(f)
	for _, e := range []struct{ name, body string }{{"oci-layout", `{"imageLayoutVersion":"1.0.0"}`}, {"index.json", `{}`}, {"../escape", "x"}} {
		tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(e.body))
	}
	tw.Close()
	f.Close()
	for _, p := range []string{notImage, evil, filepath.Join(dir, "save.tar.gz") + "-missing"} {
		out, _, code := d.cli("", "--json", "image", "import", p, "--name", "bad")
		if code == 0 {
			t.Fatalf("import of %s succeeded", p)
		}
		if !strings.HasSuffix(p, "-missing") {
			var eb api.ErrorBody
			if json.Unmarshal([]byte(out), &eb); eb.Error.Code != api.CodeImageDamaged {
				t.Errorf("import of %s: %s (%s), want %s", p, eb.Error.Code, eb.Error.Message, api.CodeImageDamaged)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "escape")); err == nil {
		t.Error("the evil layout wrote outside its directory")
	}
	if left, _ := filepath.Glob(filepath.Join(d.dataDir, "pool", "tmp", "*")); len(left) > 0 {
		t.Errorf("left in the work area: %v", left)
	}
	if code := d.errorCode("image", "info", "bad"); code != api.CodeNoImage {
		t.Errorf("a failed import left an image: %s", code)
	}
}

// standardAsImage is what a cairn image of the reference image (with
// busybox) holds: its files, and the mount points cairn gives every root.
func standardAsImage(t *testing.T) testregistry.Expect {
	want := testregistry.StandardExpect(t, testregistry.WithBusybox())
	for _, dir := range []string{"/.cairn", "/dev", "/proc", "/sys"} {
		want.Files[dir] = testregistry.Want{Type: tar.TypeDir, Mode: 0o755}
	}
	want.Files["/tmp"] = testregistry.Want{Type: tar.TypeDir, Mode: 0o1777}
	return want
}
