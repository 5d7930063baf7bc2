package runsc

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Delete kills the sandbox and gofer processes itself and waits for them
// (runsc would poll every 100 ms); afterwards neither runs and runsc knows
// no such container.
func TestDeleteKillsTheProcessesAndWaits(t *testing.T) {
	r, id, _ := counterSandbox(t, "")
	base, err := r.stateBase(id)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(base + ".state")
	if err != nil {
		t.Fatal(err)
	}
	var st containerState
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	if st.Sandbox == nil || st.Sandbox.Pid <= 0 || st.GoferPid <= 0 {
		t.Fatalf("state file does not name both processes: %+v", st)
	}
	// The guard: a pid that is not the container's process is refused.
	if _, err := openOwnProcess(os.Getpid(), "runsc-sandbox", id); err == nil {
		t.Fatal("this test's own process was taken for the sandbox")
	}
	if err := r.killProcesses(context.Background(), id); err != nil {
		t.Fatalf("kill: %v", err)
	}
	if err := r.Delete(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{st.Sandbox.Pid, st.GoferPid} {
		if alive(pid) {
			t.Errorf("process %d still runs after Delete", pid)
		}
	}
	if _, _, err := r.State(context.Background(), id); !errors.Is(err, ErrNotExist) {
		t.Fatalf("state after Delete: %v, want ErrNotExist", err)
	}
	if err := r.Delete(context.Background(), id); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
}

// alive reports whether pid is a process that has not exited (a zombie
// has).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}
