package integration

import (
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/hosttree"
	"github.com/cairn-sandbox/cairn/internal/hosttree/hosttreetest"
)

// Inside gVisor a path stays under PATH_MAX, so the sandbox makes the
// deep tree in two halves of half deep levels each ("deep" directories)
// and moves the second to the bottom of the first: then its files are
// 1,400 levels (over 7,000 bytes) below the root.
const half = 700

// walkHalf goes down half levels of "deep" from the current directory,
// making them with mkdir (set) or only entering them.
func walkHalf(mkdir bool) string {
	mk := ""
	if mkdir {
		mk = "mkdir deep; "
	}
	return `i=0; while [ $i -lt ` + strconv.Itoa(half) + ` ]; do ` + mk + `cd deep; i=$((i+1)); done; `
}

// A sandbox makes a tree past PATH_MAX with shell loops, with an odd name
// and links out of the tree at the bottom: its checkpoint uploads to both
// locations, diff answers with the change at the bottom (odd names exact
// in JSON), and a restore as a new sandbox from off-site, the local copy
// gone, has the deep file (issue 14, X01).
func TestADeepTreeMadeInASandboxGoesOffsiteAndBack(t *testing.T) {
	d, _ := offsiteDaemon(t)
	d.create("deep")
	d.sh("deep", `set -e
		mkdir -p /data/b && cd /data && `+walkHalf(true)+`
		cd /data/b && `+walkHalf(true)+`
		echo "at the bottom" > bottom
		printf x > "$(printf 'odd\nname\033[31m\377')"
		ln -s /etc/passwd passwd
		ln -s ../../.. up
		cd /data && `+walkHalf(false)+` mv /data/b/deep . && rmdir /data/b
		sync`)
	v0 := d.checkpoint("deep")
	if ck := d.waitOffsite("deep", v0.ID, "uploaded ×2", 3*time.Minute); ck.OffsiteDetail == nil || ck.OffsiteDetail.Manifest == "" {
		t.Fatalf("off-site detail: %+v", ck.OffsiteDetail)
	}

	// Out to a path gVisor takes, changed, and back.
	d.sh("deep", `set -e
		mkdir /data/b && cd /data && `+walkHalf(false)+` mv deep /data/b/
		cd /data/b && `+walkHalf(false)+`
		echo changed >> bottom
		printf y > "$(printf 'new\nname\377')"
		cd /data && `+walkHalf(false)+` mv /data/b/deep . && rmdir /data/b
		sync`)
	var entries []api.DiffEntry
	out := d.mustCLI("--json", "diff", "deep", v0.ID)
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("diff: %v: %.300q", err, out)
	}
	deepDir := "/data/" + strings.TrimSuffix(strings.Repeat("deep/", 2*half), "/")
	got := map[string]string{}
	for _, e := range entries {
		p := e.Path
		if e.PathBytes != nil {
			p = string(e.PathBytes)
		}
		got[p] = e.Kind + " " + strings.Join(e.What, ",")
	}
	want := map[string]string{
		deepDir + "/bottom":        "changed content",
		deepDir + "/new\nname\xff": "added ",
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("diff of %s: %q, want %q", hosttree.Quote(p), got[p], w)
		}
	}
	if len(entries) > 4 { // the two, and the directory holding them, which changed
		for _, e := range entries {
			t.Logf("%s %s", e.Kind, hosttree.Quote(e.Path))
		}
		t.Errorf("diff lists %d entries", len(entries))
	}

	// Off-site and back, the local copy gone.
	if out, err := exec.Command("btrfs", "subvolume", "delete", d.ckDir("deep", v0)).CombinedOutput(); err != nil {
		t.Fatalf("wipe the local copy: %v: %s", err, out)
	}
	out, errOut, code := d.cli("", "checkpoint", "restore", "deep", v0.ID, "--as", "copy", "--whole")
	if code != 0 || !strings.Contains(errOut, "from off-site") {
		t.Fatalf("restore of a wiped checkpoint: exit %d\n%s\n%s", code, out, errOut)
	}
	if out := d.sh("copy", `set -e; mkdir /b && cd /data && `+walkHalf(false)+` mv deep /b/ && cd /b && `+walkHalf(false)+` cat bottom; readlink passwd; readlink up`); out != "at the bottom\n/etc/passwd\n../../..\n" {
		t.Fatalf("at the bottom of the restored copy: %q", out)
	}
	root, err := hosttree.OpenRoot(d.rootOf("copy"))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if got := hosttreetest.Read(t, root, "b/"+strings.Repeat("deep/", half)+"odd\nname\x1b[31m\xff"); got != "x" {
		t.Fatalf("the odd name restored holds %q", got)
	}
}
