package sandbox

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// A sandbox's runsc container is named after the sandbox: its id, a dot,
// and the time it was made, in nanoseconds, as 13 base-36 digits
// ("3f2a….0dn7u78k58rtc"). A restore in place replaces a running
// container: waiting for the old sandbox process to exit (the kernel
// freeing its memory: ~0.1 s per 512 MiB) before starting the new one would
// put that on the restore's critical path, so the old one is killed, the
// new one starts at once under its own name, and the old one is removed in
// the background (retireContainer). For a moment both hold memory. Recover
// maps container names back to sandboxes and keeps the newest running one
// of each.
//
// No name may be the beginning of another: runsc takes a container id as a
// prefix and refuses one that begins more than one name, even one that is a
// name in full. So the time has a fixed width, and a container of an
// earlier cairn named with the bare sandbox id is removed before another of
// its sandbox starts.

// genDigits is the width of a container name's generation: base-36
// nanoseconds since 1970 take 13 digits until the year 2140.
const genDigits = 13

// detach takes sandbox id's instance out of the live ones and returns it
// (nil if it had none) and the name of its container.
func (m *Manager) detach(id string) (*instance, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	inst := m.live[id]
	delete(m.live, id)
	m.notifyLocked()
	if inst != nil && inst.container != "" {
		return inst, inst.container
	}
	return inst, id
}

// newContainerName is the name of a container about to start for sandbox
// id.
func newContainerName(id string) string {
	gen := strconv.FormatInt(time.Now().UnixNano(), 36)
	return id + "." + strings.Repeat("0", max(0, genDigits-len(gen))) + gen
}

// sandboxOfContainer returns the sandbox id a container name belongs to and
// the container's generation (0 for the plain id; later ones are larger).
func sandboxOfContainer(name string) (id string, gen int64) {
	id, suffix, ok := strings.Cut(name, ".")
	if !ok {
		return id, 0
	}
	gen, err := strconv.ParseInt(suffix, 36, 64)
	if err != nil || gen <= 0 {
		return name, 0 // not one of cairn's names: an orphan to sweep
	}
	return id, gen
}

// retireContainer ends the sandbox's container at once, without asking its
// processes to exit: for a restore in place, whose current state is either
// saved in the safety checkpoint or was asked to be thrown away. The
// processes are killed before it returns; waiting for them to exit and
// removing the container happen in the background, while a new container
// of the sandbox may already start (under a fresh name). If the processes
// cannot be killed that way, the container is removed before it returns.
func (m *Manager) retireContainer(ctx context.Context, sb metadata.Sandbox) error {
	inst, name := m.detach(sb.ID)
	if inst != nil {
		inst.close()
	}
	if _, gen := sandboxOfContainer(name); gen == 0 {
		// An earlier cairn's bare-id name: runsc could no longer tell it
		// from the next container's (see above).
		return m.deleteContainer(ctx, sb, name)
	}
	wait, err := m.cfg.Runtime.KillProcesses(ctx, name)
	if err != nil {
		slog.Debug("retire container: removing it before going on", "sandbox", sb.Name, "container", name, "err", err)
		return m.deleteContainer(ctx, sb, name)
	}
	m.retirements.Go(func() {
		ctx := context.Background()
		logErr("retire container: wait for its processes", wait(ctx), "sandbox", sb.Name, "container", name)
		logErr("retire container: delete", m.cfg.Runtime.Delete(ctx, name), "sandbox", sb.Name, "container", name)
	})
	return nil
}

// removeContainer removes the sandbox's container at once, killing
// whatever still runs in it: for a sandbox whose processes have ended
// already (a saved session).
func (m *Manager) removeContainer(ctx context.Context, sb metadata.Sandbox) error {
	inst, name := m.detach(sb.ID)
	if inst != nil {
		inst.close()
	}
	return m.deleteContainer(ctx, sb, name)
}

func (m *Manager) deleteContainer(ctx context.Context, sb metadata.Sandbox, name string) error {
	if err := m.cfg.Runtime.Delete(context.WithoutCancel(ctx), name); err != nil {
		return errdefs.Wrap(api.CodeRuntimeFailed, err, "stop sandbox %s", sb.Name)
	}
	return nil
}
