package runsc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeSandbox is a control server that answers every call the same way,
// and the state file and lock file of its container, in a state root of
// its own: the fast path's decisions without a real sandbox.
type fakeSandbox struct {
	r         *Runsc
	id        string
	statePath string
	mu        sync.Mutex
	methods   []string   // methods called, in order
	args      []string   // their "arg", as JSON
	files     [][]string // the paths of the files each came with
}

// receivedFiles returns the paths of the files passed in oob, and closes
// them.
func receivedFiles(oob []byte) []string {
	msgs, _ := unix.ParseSocketControlMessage(oob)
	var paths []string
	for _, m := range msgs {
		fds, _ := unix.ParseUnixRights(&m)
		for _, fd := range fds {
			p, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
			paths = append(paths, p)
			unix.Close(fd)
		}
	}
	return paths
}

// newFakeSandbox writes a state file with status and serves answer on the
// control socket: "ok", "unknown" (urpc's unknown method), "fail" (the
// method returned an error), "slow" (ok after 150 ms), "close" (no answer),
// "hang" (none, ever), or
// "none" (no socket at all). With altPath, the state file records no socket
// path and the socket is where runsc looks next.
func newFakeSandbox(t *testing.T, status, answer string, altPath bool) *fakeSandbox {
	t.Helper()
	root := t.TempDir()
	f := &fakeSandbox{r: New("/nonexistent/runsc", root), id: "fake"}
	base := filepath.Join(root, f.id+"_sandbox:"+f.id)
	f.statePath = base + ".state"
	sock := filepath.Join(root, "ctl.sock")
	recorded := sock
	if altPath {
		sock, recorded = filepath.Join(root, "runsc-"+f.id+".sock"), ""
	}
	state := map[string]any{
		"id": f.id, "status": status, "bundleDir": "/b", "owner": "",
		"spec":    map[string]any{"ociVersion": "1.0.0", "process": map[string]any{"args": []string{"/bin/sh", "-c", "echo <&>"}}},
		"sandbox": map[string]any{"id": f.id, "pid": 1234, "controlSocketPath": recorded},
		"saver":   map[string]any{"rootDir": root, "id": map[string]any{"sandboxId": f.id, "containerId": f.id}},
	}
	b, _ := json.Marshal(state)
	if err := os.WriteFile(f.statePath, b, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".lock", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if answer == "none" {
		return f
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				// The request's first bytes carry the files, if any.
				buf, oob := make([]byte, 64<<10), make([]byte, unix.CmsgSpace(16*4))
				n, oobn, _, _, err := conn.(*net.UnixConn).ReadMsgUnix(buf, oob)
				if err != nil {
					return
				}
				var req struct {
					Method string          `json:"method"`
					Arg    json.RawMessage `json:"arg"`
				}
				if err := json.NewDecoder(io.MultiReader(bytes.NewReader(buf[:n]), conn)).Decode(&req); err != nil {
					return
				}
				f.mu.Lock()
				f.methods = append(f.methods, req.Method)
				f.args = append(f.args, string(req.Arg))
				f.files = append(f.files, receivedFiles(oob[:oobn]))
				f.mu.Unlock()
				switch answer {
				case "ok":
					conn.Write([]byte(`{"success":true,"err":"","result":{}}`))
				case "unknown":
					conn.Write([]byte(`{"success":false,"err":"unknown method","result":null}`))
				case "fail":
					conn.Write([]byte(`{"success":false,"err":"post-resume hook failed","result":null}`))
				case "slow":
					time.Sleep(150 * time.Millisecond)
					conn.Write([]byte(`{"success":true,"err":"","result":{}}`))
				case "hang":
					<-done
				}
			}()
		}
	}()
	return f
}

func (f *fakeSandbox) state(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(f.statePath)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func (f *fakeSandbox) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.methods...)
}

// Outcomes of a fast path, as the decision tests name them.
const (
	outcomeOK         = "ok"
	outcomeWrongState = "wrong state"
	outcomeFellBack   = "fall back"
	outcomeFailed     = "error"
)

// outcome names what a fast path's error means for its caller.
func outcome(err error) string {
	var fb *fallbackError
	switch {
	case errors.As(err, &fb):
		return outcomeFellBack
	case errors.Is(err, ErrWrongState):
		return outcomeWrongState
	case err != nil:
		return outcomeFailed
	}
	return outcomeOK
}

func TestControlDecisions(t *testing.T) {
	answerTimeout = 200 * time.Millisecond
	t.Cleanup(func() { answerTimeout = 30 * time.Second })
	const (
		ok       = outcomeOK
		wrong    = outcomeWrongState
		fellBack = outcomeFellBack
		failed   = outcomeFailed
	)
	for _, tc := range []struct {
		name       string
		t          transition
		status     string // recorded before
		answer     string
		altPath    bool
		want       string
		wantStatus string // recorded after
		wantCalls  []string
	}{
		{"pause", pauseTransition, "running", "ok", false, ok, "paused", []string{methodPause}},
		{"resume", resumeTransition, "paused", "ok", false, ok, "running", []string{methodResume}},
		{"socket in the state root", pauseTransition, "running", "ok", true, ok, "paused", []string{methodPause}},
		{"pause paused", pauseTransition, "paused", "ok", false, wrong, "paused", nil},
		{"pause created", pauseTransition, "created", "ok", false, wrong, "created", nil},
		{"pause stopped", pauseTransition, "stopped", "ok", false, wrong, "stopped", nil},
		{"resume running", resumeTransition, "running", "ok", false, wrong, "running", nil},
		{"no socket", pauseTransition, "running", "none", false, fellBack, "running", nil},
		{"unknown method", pauseTransition, "running", "unknown", false, fellBack, "running", []string{methodPause}},
		{"resume, unknown method", resumeTransition, "paused", "unknown", false, fellBack, "paused", []string{methodResume}},
		{"closed without answer", pauseTransition, "running", "close", false, fellBack, "running", []string{methodPause}},
		// containerManager.Pause cannot fail once it runs: an error is
		// from before it ran.
		{"pause answers an error", pauseTransition, "running", "fail", false, fellBack, "running", []string{methodPause}},
		// containerManager.Resume unpauses before anything that can fail.
		{"resume answers an error", resumeTransition, "paused", "fail", false, failed, "running", []string{methodResume}},
		// The sandbox has the request: it will be paused.
		{"no answer", pauseTransition, "running", "hang", false, failed, "paused", []string{methodPause}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSandbox(t, tc.status, tc.answer, tc.altPath)
			before := f.state(t)
			err := f.r.control(context.Background(), f.id, tc.t)
			if got := outcome(err); got != tc.want {
				t.Fatalf("control: %v (%s), want %s", err, outcome(err), tc.want)
			}
			after := f.state(t)
			if after["status"] != tc.wantStatus {
				t.Errorf("status recorded: %v, want %s", after["status"], tc.wantStatus)
			}
			// Everything else of the state file is as runsc wrote it.
			delete(before, "status")
			delete(after, "status")
			if !reflect.DeepEqual(before, after) {
				t.Errorf("state file changed beyond its status:\nbefore %v\nafter  %v", before, after)
			}
			if calls := f.calls(); !reflect.DeepEqual(calls, tc.wantCalls) {
				t.Errorf("calls %v, want %v", calls, tc.wantCalls)
			}
			if f.args != nil && f.args[0] != "null" {
				t.Errorf("arg %s, want null", f.args[0])
			}
		})
	}
}

// TestControlContext: a context that ends before the request is sent ends
// the call without falling back; one that ends after does not cut the wait
// for the answer short.
func TestControlContext(t *testing.T) {
	f := newFakeSandbox(t, "running", "ok", false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := f.r.control(ctx, f.id, pauseTransition)
	var fb *fallbackError
	if err == nil || errors.As(err, &fb) {
		t.Fatalf("cancelled context: got %v, want an error that does not fall back", err)
	}
	if st := f.state(t)["status"]; st != "running" || len(f.calls()) != 0 {
		t.Fatalf("cancelled context: status %v, calls %v", st, f.calls())
	}

	f = newFakeSandbox(t, "running", "slow", false)
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := f.r.control(ctx, f.id, pauseTransition); err != nil {
		t.Fatalf("context ending while the sandbox pauses: %v", err)
	}
	if st := f.state(t)["status"]; st != "paused" {
		t.Fatalf("status %v after a slow pause, want paused", st)
	}
}
