package integration

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
)

// An operator keeps a checkpoint made from inside with cairn checkpoint
// keep: it stops counting toward --inside-keep and is never pruned, while
// the unkept ones made from inside still are. The sandbox's own socket
// cannot keep one.
func TestKeepInsideCheckpoint(t *testing.T) {
	d := startDaemon(t)
	sb := d.create("k", "--inside-rate", "20", "--inside-keep", "2")
	fromInside := func() string {
		t.Helper()
		out, errOut, code := d.cli("", "exec", "k", "--", "cairn-env", "checkpoints", "create")
		if code != 0 {
			t.Fatalf("checkpoint from inside: exit %d %s %s", code, out, errOut)
		}
		return strings.TrimSpace(strings.TrimPrefix(out, "Checkpoint created: "))
	}
	first, second := fromInside(), fromInside()

	// The list shows what was made from inside, and info says it may go.
	list := d.mustCLI("checkpoint", "list", "k")
	marked := 0
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[0], "v") && slices.Contains(f[1:], "inside") {
			marked++
		}
	}
	if marked != 2 || !strings.Contains(list, "cairn checkpoint keep k ID") {
		t.Errorf("checkpoint list does not mark the two made from inside:\n%s", list)
	}
	if info := d.mustCLI("checkpoint", "info", "k", first); !strings.Contains(info, "from inside   yes (may be deleted") {
		t.Errorf("checkpoint info %s:\n%s", first, info)
	}

	// The sandbox's socket has no keep route, for its name or any other.
	sock := d.sockClient(sb.ID)
	for _, path := range []string{"/v1/checkpoints/" + first + "/keep", "/v1/sandboxes/k/checkpoints/" + first + "/keep"} {
		if status, body := sock("POST", path, ""); status != http.StatusNotFound || codeOf(body) != api.CodeInvalidRequest {
			t.Errorf("management socket: POST %s: %d %s, want 404 V03", path, status, body)
		}
	}

	// Keep the first; again is fine; it answers the checkpoint.
	var kept api.Checkpoint
	for range 2 {
		if err := json.Unmarshal([]byte(d.mustCLI("--json", "checkpoint", "keep", "k", first)), &kept); err != nil {
			t.Fatal(err)
		}
	}
	if kept.ID != first || kept.FromInside {
		t.Errorf("keep answered %+v, want %s not from inside", kept, first)
	}
	if info := d.mustCLI("checkpoint", "info", "k", first); !strings.Contains(info, "from inside   no") || !strings.Contains(info, "trigger       manual") {
		t.Errorf("checkpoint info %s after keep:\n%s", first, info)
	}
	// Unknown checkpoint or sandbox: K08, S01.
	for args, code := range map[[2]string]string{{"k", "v99"}: api.CodeNoCheckpoint, {"nosuch", first}: api.CodeNoSandbox} {
		if _, errOut, exit := d.cli("", "checkpoint", "keep", args[0], args[1]); exit == 0 || !strings.Contains(errOut, "error "+code) {
			t.Errorf("keep %s %s: exit %d %q, want %s", args[0], args[1], exit, errOut, code)
		}
	}

	// Two more from inside: of the three unkept, the oldest is pruned;
	// the kept one stays.
	third, fourth := fromInside(), fromInside()
	var ids, inside []string
	for _, ck := range d.checkpoints("k") {
		ids = append(ids, ck.ID)
		if ck.FromInside {
			inside = append(inside, ck.ID)
		}
	}
	if got, want := strings.Join(inside, " "), third+" "+fourth; got != want {
		t.Errorf("checkpoints made from inside: %s, want %s", got, want)
	}
	has := func(id string) bool {
		for _, x := range ids {
			if x == id {
				return true
			}
		}
		return false
	}
	if !has(first) {
		t.Errorf("the kept checkpoint %s was pruned: %v", first, ids)
	}
	if has(second) {
		t.Errorf("the unkept %s was not pruned: %v", second, ids)
	}
}
