package runsc

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCheckpointControlDecisions: what Checkpoint's fast path sends, when
// it gives way to runsc, and what it leaves in the image directory.
func TestCheckpointControlDecisions(t *testing.T) {
	const (
		ok       = outcomeOK
		wrong    = outcomeWrongState
		fellBack = outcomeFellBack
		failed   = outcomeFailed
	)
	all := []string{"checkpoint.img", "pages_meta.img", "pages.img"}
	for _, tc := range []struct {
		name      string
		status    string
		answer    string
		want      string
		wantCalls int
		wantFiles []string // left in the image directory
	}{
		{"running", "running", "ok", ok, 1, all},
		{"paused", "paused", "ok", ok, 1, all},
		{"created", "created", "ok", ok, 1, all},
		{"stopped", "stopped", "ok", wrong, 0, nil},
		// runsc, run instead, must be able to create the files.
		{"no socket", "running", "none", fellBack, 0, nil},
		{"unknown method", "running", "unknown", fellBack, 1, nil},
		{"closed without answer", "running", "close", fellBack, 1, nil},
		// The sandbox tried: its error is the checkpoint's, and the caller
		// throws the image directory away.
		{"answers an error", "running", "fail", failed, 1, all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSandbox(t, tc.status, tc.answer, false)
			image := filepath.Join(t.TempDir(), "image")
			err := f.r.checkpointControl(context.Background(), f.id, image, tc.name != "paused")
			if got := outcome(err); got != tc.want {
				t.Fatalf("checkpointControl: %v (%s), want %s", err, got, tc.want)
			}
			if calls := f.calls(); len(calls) != tc.wantCalls {
				t.Fatalf("calls %v, want %d", calls, tc.wantCalls)
			}
			if got := dirNames(t, image); !reflect.DeepEqual(got, sortedNames(tc.wantFiles)) {
				t.Errorf("image directory holds %v, want %v", got, tc.wantFiles)
			}
			if st := f.state(t)["status"]; st != tc.status {
				t.Errorf("state file says %v after, want %s untouched", st, tc.status)
			}
			if tc.wantCalls == 0 {
				return
			}
			if f.methods[0] != methodCheckpoint {
				t.Errorf("method %s, want %s", f.methods[0], methodCheckpoint)
			}
			// The files travel in runsc's order, and the options say what
			// `runsc checkpoint --compression=none [--leave-running]` says.
			var paths []string
			for _, p := range f.files[0] {
				paths = append(paths, strings.TrimSuffix(filepath.Base(p), " (deleted)"))
			}
			if !reflect.DeepEqual(paths, all) {
				t.Errorf("files sent %v, want %v", f.files[0], all)
			}
			var arg map[string]any
			if err := json.Unmarshal([]byte(f.args[0]), &arg); err != nil {
				t.Fatal(err)
			}
			want := map[string]any{
				"metadata":        map[string]any{"compression": "none"},
				"have_pages_file": true,
				"Resume":          tc.name != "paused",
			}
			if !reflect.DeepEqual(arg, want) {
				t.Errorf("arg %s, want %v", f.args[0], want)
			}
		})
	}
}

// TestCheckpointControlLeavesOthersFiles: an image directory that already
// holds an image is an error, and its files stay as they were.
func TestCheckpointControlLeavesOthersFiles(t *testing.T) {
	f := newFakeSandbox(t, "running", "ok", false)
	image := t.TempDir()
	if err := os.WriteFile(filepath.Join(image, "pages_meta.img"), []byte("older"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := f.r.checkpointControl(context.Background(), f.id, image, true)
	var fb *fallbackError
	if err == nil || errors.As(err, &fb) {
		t.Fatalf("checkpoint into an image directory in use: %v, want an error that does not fall back", err)
	}
	if got := dirNames(t, image); !reflect.DeepEqual(got, []string{"pages_meta.img"}) {
		t.Errorf("image directory holds %v, want only the file that was there", got)
	}
	if b, _ := os.ReadFile(filepath.Join(image, "pages_meta.img")); string(b) != "older" {
		t.Errorf("the file that was there now holds %q", b)
	}
	if calls := f.calls(); len(calls) != 0 {
		t.Errorf("calls %v, want none", calls)
	}
}

// TestCheckpointControlContext: a context that ends while the sandbox
// saves ends the wait with an error that does not fall back.
func TestCheckpointControlContext(t *testing.T) {
	f := newFakeSandbox(t, "running", "hang", false)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := f.r.checkpointControl(ctx, f.id, t.TempDir(), true)
	var fb *fallbackError
	if err == nil || errors.As(err, &fb) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("context ending during the save: %v, want a deadline error that does not fall back", err)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func sortedNames(names []string) []string {
	if names == nil {
		return nil
	}
	return slices.Sorted(slices.Values(names))
}
