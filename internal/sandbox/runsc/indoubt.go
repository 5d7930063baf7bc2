package runsc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/cairn-sandbox/cairn/internal/container"
)

// A pause or resume through the control socket (control.go) sends the call
// and then records the new status in the state file. A process killed
// between the two leaves a sandbox paused whose file says "running", or
// running whose file says "paused": resuming the first by the file never
// happens (nobody inside answers again), and resuming the second panics
// the sentry. So before it sends the call, control writes a marker beside
// the state file, STATE/<id>_sandbox:<id>.cairn-transition, holding the
// status it is making, and removes it once the file is written (or the
// change undone). A marker found later means a change whose outcome the
// state file does not tell: InDoubt reports it, and the caller, which can
// see whether the processes inside run (cairn-init dials cairnd), says
// which with Settle.
//
// The marker is written without fsync: it only has to outlive a killed
// process, and a host crash takes the sandbox with it.

const transitionSuffix = ".cairn-transition"

// ErrInDoubt is returned by Pause and Resume of a container whose last
// change is in doubt until Settle: by a state file that may be wrong, a
// resume could panic the sentry, a pause be lost.
var ErrInDoubt = errors.New("its last pause or resume was cut short and is not settled")

func (r *Runsc) transitionMarker(id string) (string, error) {
	base, err := r.stateBase(id)
	if err != nil {
		return "", err
	}
	return base + transitionSuffix, nil
}

// markTransition records that the change of container id to status to is
// being sent; the returned function removes the record.
func (r *Runsc) markTransition(id, to string) (clear func(), err error) {
	path, err := r.transitionMarker(id)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte(to+"\n"), 0o600); err != nil {
		return nil, err
	}
	return func() { os.Remove(path) }, nil
}

// InDoubt reports whether a pause or resume of container id was cut short
// between sending it and recording it (see above), and which status it
// was making: the sandbox is paused or running whatever State says.
func (r *Runsc) InDoubt(id string) (to container.Status, inDoubt bool) {
	path, err := r.transitionMarker(id)
	if err != nil {
		return "", false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	return container.Status(strings.TrimSpace(string(b))), true
}

// Settle records that container id is in fact status (container.Running
// or container.Paused) after InDoubt reported a change in doubt: under the
// state file lock it writes status into the state file and removes the
// marker. Without a marker it changes nothing.
func (r *Runsc) Settle(ctx context.Context, id string, status container.Status) error {
	if status != container.Running && status != container.Paused {
		return fmt.Errorf("runsc settle: %q is not running or paused", status)
	}
	path, err := r.transitionMarker(id)
	if err != nil {
		return err
	}
	c, err := r.lockState(ctx, id, "settle")
	if err != nil {
		var fb *fallbackError
		if errors.As(err, &fb) {
			return fb.err
		}
		return err
	}
	defer c.release()
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil // settled meanwhile
	}
	if c.Status != string(status) {
		if c.Status != string(container.Running) && c.Status != string(container.Paused) {
			return fmt.Errorf("runsc settle: %w: container %q is %s", ErrWrongState, id, c.Status)
		}
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(c.raw, &doc); err != nil {
			return fmt.Errorf("state file %s: %w", c.path, err)
		}
		doc["status"], _ = json.Marshal(string(status))
		out, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		if err := replaceFile(c.path, out, 0o640); err != nil {
			return fmt.Errorf("runsc settle: %w", err)
		}
	}
	return os.Remove(path)
}
