package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A checkpoint under /.cairn/checkpoints shows its own files, also after
// checkpoints came and went there: found by the crash trials (it needs no
// crash), where a running sandbox read another checkpoint's /root/mark
// under a checkpoint's name while the pool on the host held the right one.
func TestBrowsedCheckpointsShowTheirOwnFiles(t *testing.T) {
	d := startDaemon(t)
	d.create("own")
	root := d.rootOf("own")
	browse := filepath.Join(d.dataDir, "pool", "browse", filepath.Base(root))
	marks := map[string]string{}
	devOwner := map[uint64]string{} // st_dev of a browsed subvolume → the checkpoint it was last seen for
	var kept []string               // checkpoint ids, oldest first
	for round := range 14 {
		mark := fmt.Sprintf("m%d", round)
		d.sh("own", "echo "+mark+" > /root/mark && sync")
		id := d.checkpoint("own").ID
		marks[id] = mark
		kept = append(kept, id)
		// Keep six: one falls out of the five browsable at each round,
		// and every other round one of the five is deleted as well.
		if round%2 == 1 && len(kept) > 6 {
			victim := kept[len(kept)-3]
			d.mustCLI("checkpoint", "delete", "own", victim)
			kept = append(kept[:len(kept)-3], kept[len(kept)-2:]...)
		}
		want := kept[max(0, len(kept)-5):]
		var out string
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			out = d.sh("own", browseScript)
			if strings.Count(out, "\n") == len(want) || time.Now().After(deadline) {
				break
			}
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			id, got, _ := strings.Cut(line, " ")
			path := filepath.Join(browse, id, "root", "mark")
			var st syscall.Stat_t
			syscall.Stat(path, &st)
			if got == marks[id] {
				devOwner[st.Dev] = id
				continue
			}
			host, err := os.ReadFile(path)
			t.Fatalf("round %d: inside the sandbox /.cairn/checkpoints/%s/root/mark reads %q, but checkpoint %s was taken with %q; on the host %s holds %q (%v): the sandbox sees another checkpoint's file under %s's name.\n"+
				"On the host that file is device %d inode %d; the subvolume last seen with that device was %s's, holding %q\n/.cairn/checkpoints:\n%s",
				round, id, got, id, marks[id], path, strings.TrimSpace(string(host)), err, id, st.Dev, st.Ino, devOwner[st.Dev], marks[devOwner[st.Dev]], out)
		}
	}
}
