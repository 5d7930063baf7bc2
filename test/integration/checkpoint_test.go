package integration

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	_ "modernc.org/sqlite"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
)

// rootOf is the host path of a sandbox's root subvolume.
func (d *daemon) rootOf(name string) string {
	d.t.Helper()
	var sb api.Sandbox
	if err := json.Unmarshal([]byte(d.mustCLI("--json", "info", name)), &sb); err != nil {
		d.t.Fatal(err)
	}
	return filepath.Join(d.dataDir, "pool", "sandboxes", sb.ID)
}

// ckDir is where a checkpoint's tree is on the host: its own subvolume,
// which never moves.
func (d *daemon) ckDir(sandbox string, ck api.Checkpoint) string {
	return filepath.Join(d.dataDir, "pool", "checkpoints", ck.GlobalID)
}

// checkpoint takes a checkpoint with the CLI and returns its id.
func (d *daemon) checkpoint(name string, flags ...string) api.Checkpoint {
	d.t.Helper()
	var ck api.Checkpoint
	out := d.mustCLI(append([]string{"--json", "checkpoint", "create", name}, flags...)...)
	if err := json.Unmarshal([]byte(out), &ck); err != nil {
		d.t.Fatalf("checkpoint create: %q: %v", out, err)
	}
	return ck
}

// manifest describes every entry under dir on the host: type, mode,
// owner, size, content hash, link target, xattrs, whether it is sparse, and
// which entries are hard links of each other.
func manifest(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	inodes := map[uint64]string{}
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		desc := fmt.Sprintf("mode=%o uid=%d gid=%d", st.Mode, st.Uid, st.Gid)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			h := sha256.New()
			io.Copy(h, f)
			f.Close()
			desc += fmt.Sprintf(" size=%d sha=%s sparse=%v", st.Size, hex.EncodeToString(h.Sum(nil))[:16], st.Blocks*512 < st.Size/2)
			if st.Nlink > 1 {
				if first, ok := inodes[st.Ino]; ok {
					desc += " hardlink-of=" + first
				} else {
					inodes[st.Ino] = rel
				}
			}
		case unix.S_IFLNK:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		}
		if names, err := listXattrs(p); err == nil && len(names) > 0 {
			for _, n := range names {
				v := make([]byte, 256)
				k, _ := unix.Lgetxattr(p, n, v)
				desc += fmt.Sprintf(" xattr:%s=%s", n, v[:max(k, 0)])
			}
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func listXattrs(p string) ([]string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(p, buf)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range strings.Split(string(buf[:n]), "\x00") {
		if s != "" {
			names = append(names, s)
		}
	}
	sort.Strings(names)
	return names, nil
}

func TestRestoreBringsBackEveryKindOfFile(t *testing.T) {
	d := startDaemon(t)
	d.create("files")
	d.sh("files", `set -e
		mkdir -p /data/empty /data/sub
		echo "file A" > /data/a
		chmod 640 /data/a
		chown 1234:5678 /data/a
		head -c 300000 /dev/urandom > /data/sub/random.bin
		ln -s ../a /data/sub/link-to-a
		ln /data/sub/random.bin /data/hardlink
		dd if=/dev/zero of=/data/sparse bs=1 count=1 seek=104857600 2>/dev/null
		chmod 4755 /data/sub
		sync`)
	root := d.rootOf("files")
	// Extended attributes are set from the host on the same disk (busybox
	// has no setfattr); the checkpoint must keep them.
	if err := unix.Setxattr(filepath.Join(root, "data/a"), "user.origin", []byte("cairn-test"), 0); err != nil {
		t.Fatalf("setxattr: %v", err)
	}
	before := manifest(t, filepath.Join(root, "data"))
	if !strings.Contains(before["sparse"], "sparse=true") {
		t.Fatalf("the test's sparse file is not sparse: %s", before["sparse"])
	}

	v0 := d.checkpoint("files", "--comment", "state A")
	if v0.ID != "v0" || v0.Consistency != "frozen" || v0.Trigger != "manual" {
		t.Fatalf("first checkpoint: %+v", v0)
	}
	d.sh("files", "echo B > /data/b; rm -rf /data/a /data/sub; echo changed > /data/hardlink")
	afterB := manifest(t, filepath.Join(root, "data"))

	out := d.mustCLI("restore", "files", "v0", "--wait")
	if !strings.Contains(out, "restored") {
		t.Fatalf("restore output %q", out)
	}
	root = d.rootOf("files")
	if got := manifest(t, filepath.Join(root, "data")); !reflect.DeepEqual(got, before) {
		t.Fatalf("after restore the tree differs:\n got %v\nwant %v", got, before)
	}
	if out := d.sh("files", "cat /data/a; test -e /data/b && echo B-still-there || echo no-B"); out != "file A\nno-B\n" {
		t.Fatalf("inside after restore: %q", out)
	}
	// The safety checkpoint holds the B state and restores it.
	var cks []api.Checkpoint
	json.Unmarshal([]byte(d.mustCLI("--json", "checkpoint", "list", "files", "--include-auto")), &cks)
	var safety *api.Checkpoint
	for i := range cks {
		if cks[i].Trigger == api.TriggerRestore {
			safety = &cks[i]
		}
	}
	if safety == nil || !strings.HasPrefix(safety.ID, "auto-") {
		t.Fatalf("no automatic safety checkpoint with trigger restore: %+v", cks)
	}
	var plain []api.Checkpoint
	json.Unmarshal([]byte(d.mustCLI("--json", "checkpoint", "list", "files")), &plain)
	if len(plain) != 1 || plain[0].ID != "v0" || !plain[0].Current {
		t.Fatalf("checkpoint list without --include-auto: %+v (want only v0, current)", plain)
	}
	d.mustCLI("restore", "files", safety.ID, "--wait", "--no-safety-checkpoint")
	if got := manifest(t, filepath.Join(d.rootOf("files"), "data")); !reflect.DeepEqual(got, afterB) {
		t.Fatalf("restoring the safety checkpoint did not bring back the B state:\n got %v\nwant %v", got, afterB)
	}
	if out := d.sh("files", "cat /data/b"); out != "B\n" {
		t.Fatalf("after undoing the restore: %q", out)
	}
}

func TestCheckpointsOfARunningSQLiteDatabaseAreConsistent(t *testing.T) {
	d := startDaemon(t)
	d.create("db", "--image", "debian")
	d.sh("db", `sqlite3 /root/app.db "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, pad BLOB); CREATE INDEX tv ON t(v);"`)
	// A writer that never stops: transactions of several rows each.
	d.mustCLI("exec", "-d", "db", "--", "/bin/sh", "-c",
		`i=0; while true; do i=$((i+1)); sqlite3 /root/app.db "BEGIN; INSERT INTO t(v,pad) VALUES ('a$i', randomblob(3000)); INSERT INTO t(v,pad) VALUES ('b$i', randomblob(5000)); UPDATE t SET v = v || 'x' WHERE id % 7 = $i % 7; COMMIT;"; done`)
	var ids []api.Checkpoint
	for i := 0; i < 5; i++ {
		time.Sleep(400 * time.Millisecond)
		ck := d.checkpoint("db")
		if ck.Consistency != "frozen" {
			t.Fatalf("checkpoint %s is %s, want frozen", ck.ID, ck.Consistency)
		}
		ids = append(ids, ck)
	}
	// Every checkpoint's database opens and passes integrity_check.
	rows := -1
	for _, ck := range ids {
		dir := t.TempDir()
		src := filepath.Join(d.ckDir("db", ck), "root")
		for _, f := range []string{"app.db", "app.db-journal", "app.db-wal"} {
			if b, err := os.ReadFile(filepath.Join(src, f)); err == nil {
				os.WriteFile(filepath.Join(dir, f), b, 0o644)
			}
		}
		db, err := sql.Open("sqlite", filepath.Join(dir, "app.db"))
		if err != nil {
			t.Fatal(err)
		}
		var res string
		if err := db.QueryRow("PRAGMA integrity_check").Scan(&res); err != nil || res != "ok" {
			t.Fatalf("checkpoint %s: integrity_check = %q, %v", ck.ID, res, err)
		}
		var n int
		db.QueryRow("SELECT count(*) FROM t").Scan(&n)
		db.Close()
		if n < rows {
			t.Fatalf("checkpoint %s has %d rows, fewer than the one before (%d)", ck.ID, n, rows)
		}
		rows = n
	}
	if rows <= 0 {
		t.Fatal("the writer wrote nothing")
	}
	// And inside a sandbox restored from the last one.
	d.mustCLI("checkpoint", "restore", "db", ids[len(ids)-1].ID, "--as", "db-copy")
	if out := d.sh("db-copy", `sqlite3 /root/app.db "PRAGMA integrity_check"`); out != "ok\n" {
		t.Fatalf("integrity_check inside the restored copy: %q", out)
	}
}

func TestForkChildrenAreIndependent(t *testing.T) {
	d := startDaemon(t)
	d.create("parent")
	d.sh("parent", "echo base > /root/state")
	var kids []api.Sandbox
	if err := json.Unmarshal([]byte(d.mustCLI("--json", "fork", "parent", "--count", "3")), &kids); err != nil || len(kids) != 3 {
		t.Fatalf("fork: %v %+v", err, kids)
	}
	ids := map[string]bool{}
	for i, k := range kids {
		if want := fmt.Sprintf("parent-fork-%d", i+1); k.Name != want || k.State != api.StateRunning || k.Parent != "parent" {
			t.Fatalf("child %d: %+v", i, k)
		}
		ids[k.ID] = true
		if out := d.sh(k.Name, "cat /root/state"); out != "base\n" {
			t.Fatalf("%s sees %q, want the state at the checkpoint", k.Name, out)
		}
	}
	if len(ids) != 3 {
		t.Fatal("children share an id")
	}
	// The fork checkpoint was taken automatically with trigger fork.
	var cks []api.Checkpoint
	json.Unmarshal([]byte(d.mustCLI("--json", "checkpoint", "list", "parent", "--include-auto")), &cks)
	if len(cks) != 1 || cks[0].Trigger != api.TriggerFork {
		t.Fatalf("parent's checkpoints after fork: %+v", cks)
	}
	var info api.Sandbox
	json.Unmarshal([]byte(d.mustCLI("--json", "info", "parent-fork-2")), &info)
	if info.Parent != "parent" || info.SourceCheckpoint != "parent/"+cks[0].ID {
		t.Fatalf("child info: parent %q source %q", info.Parent, info.SourceCheckpoint)
	}
	d.sh("parent-fork-1", "echo one > /root/state; echo mine > /root/only-in-1")
	d.sh("parent", "echo later > /root/state")
	if out := d.sh("parent", "cat /root/state; ls /root"); out != "later\nstate\n" {
		t.Fatalf("parent sees a child's writes: %q", out)
	}
	for _, k := range []string{"parent-fork-2", "parent-fork-3"} {
		if out := d.sh(k, "cat /root/state; ls /root"); out != "base\nstate\n" {
			t.Fatalf("%s sees another's writes: %q", k, out)
		}
	}
	list := d.mustCLI("list", "--parent", "parent")
	for _, k := range kids {
		if !strings.Contains(list, k.Name) {
			t.Fatalf("list --parent misses %s:\n%s", k.Name, list)
		}
	}
	// Deleting the parent leaves the children working.
	d.mustCLI("delete", "parent")
	if out := d.sh("parent-fork-3", "cat /root/state"); out != "base\n" {
		t.Fatalf("after deleting the parent: %q", out)
	}
	d.mustCLI("restart", "parent-fork-3")
	if out := d.sh("parent-fork-3", "cat /root/state"); out != "base\n" {
		t.Fatalf("child restarted after the parent was deleted: %q", out)
	}
}

func TestExecDuringRestoreRunsOnTheRestoredState(t *testing.T) {
	d := startDaemon(t)
	d.create("busy")
	d.sh("busy", "echo before > /root/f")
	d.checkpoint("busy")
	d.sh("busy", "echo after > /root/f")
	var op api.Operation
	if err := json.Unmarshal([]byte(d.mustCLI("--json", "restore", "busy", "v0")), &op); err != nil || op.ID == "" {
		t.Fatalf("restore without --wait should answer an operation: %v", err)
	}
	// Issued while the restore runs: it waits and runs on the restored disk.
	if out := d.sh("busy", "cat /root/f"); out != "before\n" {
		t.Fatalf("exec during restore saw %q", out)
	}
	got, err := d.client.Operation(context.Background(), op.ID)
	if err != nil || got.Status != api.OpSuccess {
		t.Fatalf("restore operation: %+v %v", got, err)
	}
}

func TestRestoreAsNewLeavesTheSourceAlone(t *testing.T) {
	d := startDaemon(t)
	d.create("src")
	d.sh("src", "echo one > /root/f")
	d.checkpoint("src", "--name", "golden")
	d.sh("src", "echo two > /root/f")
	d.mustCLI("checkpoint", "restore", "src", "v0", "--as", "copy1")
	d.mustCLI("snapshot", "restore", "golden", "copy2")
	d.mustCLI("snapshot", "restore", "src/v0", "copy3")
	for _, c := range []string{"copy1", "copy2", "copy3"} {
		if out := d.sh(c, "cat /root/f; hostname"); out != "one\n"+c+"\n" {
			t.Fatalf("%s: %q", c, out)
		}
	}
	if out := d.sh("src", "cat /root/f"); out != "two\n" {
		t.Fatalf("source changed by restore-as-new: %q", out)
	}
	d.sh("copy1", "echo three > /root/f")
	if out := d.sh("copy2", "cat /root/f"); out != "one\n" {
		t.Fatalf("copies share a disk: %q", out)
	}
	var cks []api.Checkpoint
	json.Unmarshal([]byte(d.mustCLI("--json", "checkpoint", "list", "src")), &cks)
	if len(cks) != 1 || cks[0].Name != "golden" {
		t.Fatalf("source's checkpoints changed: %+v", cks)
	}
}

// poolUsed is the bytes in use on the pool's file system.
func (d *daemon) poolUsed() int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Join(d.dataDir, "pool"), &st); err != nil {
		d.t.Fatal(err)
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize
}

func TestDeletingACheckpointFreesItsSpace(t *testing.T) {
	d := startDaemon(t)
	d.create("space")
	d.sh("space", "head -c 200000000 /dev/urandom > /root/big; sync")
	v0 := d.checkpoint("space")
	d.sh("space", "rm /root/big; sync")
	// Right after it is taken the checkpoint moves into the browse
	// directory (in the background); its size is exact once it settled.
	for deadline := time.Now().Add(15 * time.Second); ; {
		got, _ := d.client.Checkpoint(context.Background(), "space", "v0")
		if got.SizeExclusive >= 150_000_000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("v0 alone holds %d bytes, want about 200 MB", got.SizeExclusive)
		}
		time.Sleep(200 * time.Millisecond)
	}
	before := d.poolUsed()
	d.mustCLI("checkpoint", "delete", "space", v0.ID)
	after := d.poolUsed()
	if before-after < 150_000_000 {
		t.Fatalf("deleting v0 freed %d bytes, want about 200 MB", before-after)
	}
	if code := d.errorCode("checkpoint", "info", "space", "v0"); code != api.CodeNoCheckpoint {
		t.Fatalf("info of a deleted checkpoint: %s", code)
	}
	// The current checkpoint cannot be deleted.
	d.checkpoint("space")
	d.mustCLI("restore", "space", "v1", "--wait")
	if code := d.errorCode("checkpoint", "delete", "space", "v1"); code != api.CodeCheckpointCurrent {
		t.Fatalf("deleting the current checkpoint: %s, want %s", code, api.CodeCheckpointCurrent)
	}
	// Ids are never reused: after v0 (deleted) and v1 comes v2 (the
	// restore's safety checkpoint is automatic and takes no v-number).
	if ck := d.checkpoint("space"); ck.ID != "v2" {
		t.Fatalf("next checkpoint id %s, want v2", ck.ID)
	}
}

func TestCheckpointBadInputAndConcurrency(t *testing.T) {
	d := startDaemon(t)
	d.create("ck")
	for _, args := range [][]string{
		{"checkpoint", "info", "ck", "v9"},
		{"checkpoint", "delete", "ck", "v9"},
		{"restore", "ck", "v9"},
		{"checkpoint", "restore", "ck", "v9", "--as", "nope"},
		{"diff", "ck", "v9"},
		{"fork", "ck", "--from-checkpoint", "v9"},
		{"snapshot", "restore", "no-such-snapshot", "nope"},
		{"snapshot", "restore", "ck/v9", "nope"},
	} {
		if code := d.errorCode(args...); code != api.CodeNoCheckpoint {
			t.Errorf("cairn %v: code %s, want K08", args, code)
		}
	}
	if code := d.errorCode("checkpoint", "create", "ghost"); code != api.CodeNoSandbox {
		t.Errorf("checkpoint of an unknown sandbox: %s", code)
	}
	d.checkpoint("ck", "--name", "taken")
	if code := d.errorCode("checkpoint", "create", "ck", "--name", "taken"); code != api.CodeSnapshotNameTaken {
		t.Errorf("duplicate snapshot name: %s", code)
	}
	if code := d.errorCode("checkpoint", "create", "ck", "--name", "Bad Name"); code != api.CodeInvalidName {
		t.Errorf("bad snapshot name: %s", code)
	}
	// Concurrent checkpoints of one sandbox are serialised: distinct ids,
	// every one restorable.
	d.sh("ck", "echo x > /root/x")
	var wg sync.WaitGroup
	got := make([]api.Checkpoint, 6)
	for i := range got {
		wg.Go(func() {
			op, err := d.client.CreateCheckpoint(context.Background(), "ck", api.CreateCheckpointRequest{})
			if err == nil {
				got[i], err = d.client.WaitCheckpoint(context.Background(), op, nil)
			}
			if err != nil {
				t.Errorf("concurrent checkpoint: %v", err)
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, ck := range got {
		if seen[ck.ID] {
			t.Fatalf("checkpoint id %s given twice", ck.ID)
		}
		seen[ck.ID] = true
	}
	for id := range seen {
		name := "r-" + strings.TrimPrefix(id, "v")
		d.mustCLI("checkpoint", "restore", "ck", id, "--as", name)
		if out := d.sh(name, "cat /root/x"); out != "x\n" {
			t.Fatalf("restore of concurrent checkpoint %s: %q", id, out)
		}
	}
	// A restore while another runs is refused with a clear error.
	op, err := d.client.RestoreCheckpoint(context.Background(), "ck", "v1", api.RestoreRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.client.RestoreCheckpoint(context.Background(), "ck", "v1", api.RestoreRequest{})
	if code := client.CodeOf(err); code != api.CodeSandboxBusy {
		t.Errorf("second concurrent restore: %v, want S05", err)
	}
	d.client.Follow(context.Background(), op, nil)
}

func TestDiffListsChanges(t *testing.T) {
	d := startDaemon(t)
	d.create("df")
	d.sh("df", "mkdir /root/d; echo 1 > /root/d/keep; echo 1 > /root/d/edit; echo 1 > /root/d/gone; echo 1 > /root/d/mode")
	d.checkpoint("df")
	d.sh("df", "echo 2 >> /root/d/edit; rm /root/d/gone; chmod 600 /root/d/mode; echo new > /root/d/new")
	out := d.mustCLI("diff", "df", "v0")
	want := "M /root/d/edit (content)\nM /root/d/mode (mode 0644 -> 0600)\nA /root/d/new\nD /root/d/gone\n"
	lines := strings.Split(strings.TrimSpace(out), "\n")
	sort.Strings(lines)
	wantLines := strings.Split(strings.TrimSpace(want), "\n")
	sort.Strings(wantLines)
	if !reflect.DeepEqual(lines, wantLines) {
		t.Fatalf("diff:\n%s\nwant (any order):\n%s", out, want)
	}
	d.checkpoint("df")
	var entries []api.DiffEntry
	json.Unmarshal([]byte(d.mustCLI("--json", "diff", "df", "v0", "v1")), &entries)
	if len(entries) != 4 {
		t.Fatalf("diff v0 v1: %+v", entries)
	}
	if out := d.mustCLI("diff", "df", "v1"); strings.TrimSpace(out) != "" {
		t.Fatalf("diff against an unchanged disk: %q", out)
	}
}
