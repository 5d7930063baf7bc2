package runsc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Delete kills the sandbox and gofer processes itself and waits for them
// (runsc would poll every 100 ms); afterwards neither runs and runsc knows
// no such container.
//
// The sandbox holds 256 MiB, so that its exit (the kernel freeing them)
// takes long enough to be seen if the wait did not wait.
func TestDeleteKillsTheProcessesAndWaits(t *testing.T) {
	bin := requireRunsc(t)
	dir := t.TempDir()
	r := New(bin, newStateRoot(t, filepath.Join(dir, "state")))
	const id = "kill"
	spec := busyboxSpec(t, dir, id, `dd if=/dev/urandom of=/tmp/fill bs=1M count=256 2>/dev/null &&
		i=0; while :; do i=$((i+1)); echo $i > /out/count; usleep 5000; done`)
	startCounter(context.Background(), t, r, spec, 5)
	base, err := r.stateBase(id)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(base + ".state")
	if err != nil {
		t.Fatal(err)
	}
	st, err := parseState(raw, base+".state", id)
	if err != nil {
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
	// Gone when the wait returns, before runsc is asked anything.
	for _, pid := range []int{st.Sandbox.Pid, st.GoferPid} {
		if alive(pid) {
			t.Errorf("process %d still runs after the kill's wait returned", pid)
		}
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
