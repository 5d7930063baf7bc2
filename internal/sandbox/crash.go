package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// A sandbox whose processes die without cairnd stopping them (the host's
// OOM killer, a kill -9 of its runsc processes, a sentry panic) becomes
// crashed at once: the watch (watch.go) sees the death, sandboxDied takes
// the instance out, removes the dead container, and records state crashed
// with the reason and time. Then its restart policy decides:
//
//   - on-failure (default) and always: it starts again from its disk, as
//     after a host reboot, after 1 s, 2 s, 4 s, 8 s, 16 s (doubling with
//     each restart in the last 10 minutes); after restartLimit restarts in
//     restartWindow it stays crashed ("restart limit reached"), until a
//     `cairn start`.
//   - no: it stays crashed.
//
// A sandbox that ended by itself (its cairn-init got SIGTERM from inside)
// is stopped, not crashed, and only `always` starts it again.
//
// While crashed, exec fails at once with S10, the interval scheduler skips
// it, stop makes it stopped, start and restart start it from its disk, and
// delete takes its final checkpoint from the disk without pausing anything.

const (
	restartFirstDelay = time.Second
	restartLimit      = 5
	restartWindow     = 10 * time.Minute
)

// sandboxDied handles the death of inst, sandbox sb's instance, for the
// reason the watch gave.
// How long a death waits for cairn-init's "exiting" event (see sandboxDied).
const (
	selfExitWaitStep  = 50 * time.Millisecond
	selfExitWaitSteps = 6
)

func (m *Manager) sandboxDied(sb metadata.Sandbox, inst *instance, reason string) {
	ctx := context.Background()
	if m.cfg.Instances.get(sb.ID) != inst {
		return // taken out on purpose first: stopped, restored, replaced
	}
	// Under the sandbox's lease: a checkpoint that runs on the dead
	// sandbox fails and lets go; a lifecycle operation that holds it
	// decides itself (it took the instance out, or finds it gone).
	l, err := m.ex.queue(ctx, sb, purposeCheckpoint)
	if err != nil {
		slog.Error("sandbox died; cannot take its lease", "sandbox", sb.Name, "err", err)
		return
	}
	defer m.ex.release(l)
	if m.cfg.Instances.get(sb.ID) != inst {
		return
	}
	// cairn-init's "exiting" event comes on the agent's stream, the death
	// on the watch: give the event a moment to arrive, or a sandbox that
	// ended by itself would be taken for a crash.
	for i := 0; i < selfExitWaitSteps && !inst.selfExit.Load(); i++ {
		time.Sleep(selfExitWaitStep)
	}
	now := m.cfg.Now()
	cur, err := m.cfg.Store.SandboxByID(ctx, sb.ID)
	if err != nil {
		logErr("sandbox died", err, "sandbox", sb.Name)
		return
	}
	if m.cfg.Mine != nil && !m.cfg.Mine(cur.HostID) {
		// A stale copy: the row is the host's that took it over.
		slog.Warn("a stale copy of a sandbox another host took over died here; its row is left alone", "sandbox", sb.Name)
		m.cfg.Instances.take(sb.ID)
		inst.close()
		logErr("remove the dead stale copy's container", m.cfg.Runtime.Delete(ctx, inst.container), "sandbox", sb.Name)
		return
	}
	// The row first, then the instance goes: an exec that finds no
	// instance finds the reason already.
	switch {
	case inst.selfExit.Load() && cur.Restart != metadata.RestartAlways:
		slog.Warn("sandbox ended by itself (its cairn-init exited)", "sandbox", sb.Name, "reason", reason)
		logErr("mark stopped", m.cfg.Store.SetSandboxState(ctx, sb.ID, metadata.SandboxStopped), "sandbox", sb.Name)
	case inst.selfExit.Load():
		reason = "its cairn-init exited (" + reason + ")"
		fallthrough
	default:
		slog.Error("sandbox crashed", "sandbox", sb.Name, "id", sb.ID, "reason", reason, "restart", cur.Restart)
		logErr("mark crashed", m.cfg.Store.SetSandboxCrashed(ctx, sb.ID, reason, now), "sandbox", sb.Name)
	}
	m.cfg.Instances.take(sb.ID)
	inst.close() // execs waiting on it end now
	logErr("remove the dead sandbox's container", m.cfg.Runtime.Delete(ctx, inst.container), "sandbox", sb.Name)
	if inst.selfExit.Load() && cur.Restart != metadata.RestartAlways {
		return
	}
	m.scheduleRestart(cur, reason)
}

// scheduleRestart applies sb's restart policy to a sandbox that crashed
// (its row says so already).
func (m *Manager) scheduleRestart(sb metadata.Sandbox, reason string) {
	if sb.Restart == metadata.RestartNo {
		return
	}
	delay, ok := m.nextRestart(sb.ID)
	if !ok {
		slog.Error("sandbox crashed too often; it stays crashed", "sandbox", sb.Name, "restarts", restartLimit, "within", restartWindow)
		logErr("mark crashed", m.cfg.Store.SetSandboxCrashed(context.Background(), sb.ID,
			fmt.Sprintf("%s (restart limit reached: %d restarts within %s; start it with `cairn start %s`)", reason, restartLimit, restartWindow, sb.Name),
			m.cfg.Now()), "sandbox", sb.Name)
		return
	}
	slog.Info("sandbox crashed; starting it again from its disk", "sandbox", sb.Name, "in", delay)
	time.AfterFunc(delay, func() { m.restartCrashed(sb) })
}

// nextRestart counts a restart of sandbox id and returns its delay, or
// false past the limit.
func (m *Manager) nextRestart(id string) (time.Duration, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Now()
	var recent []time.Time
	for _, t := range m.restarts[id] {
		if now.Sub(t) < restartWindow {
			recent = append(recent, t)
		}
	}
	if len(recent) >= restartLimit {
		m.restarts[id] = recent
		return 0, false
	}
	m.restarts[id] = append(recent, now)
	return restartFirstDelay << len(recent), true
}

// forgetRestarts clears sandbox id's restart count (a user started or
// stopped it).
func (m *Manager) forgetRestarts(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.restarts, id)
}

// restartCrashed starts a crashed sandbox from its disk, unless something
// else changed it meanwhile (a user stopped, started or deleted it).
func (m *Manager) restartCrashed(sb metadata.Sandbox) {
	ctx := context.Background()
	l, err := m.ex.exclusive(ctx, sb, api.StateStarting)
	if err != nil {
		slog.Info("restart after crash: the sandbox is busy; leaving it to that operation", "sandbox", sb.Name, "err", err)
		return
	}
	defer m.ex.release(l)
	cur, err := m.cfg.Store.SandboxByID(ctx, sb.ID)
	if err != nil || cur.State != metadata.SandboxCrashed || cur.Restart == metadata.RestartNo || m.run.isLive(sb.ID) ||
		m.cfg.Mine != nil && !m.cfg.Mine(cur.HostID) {
		return // changed meanwhile, its policy was changed to no, or another host took it over
	}
	if err := m.run.startContainer(ctx, cur, ""); err != nil {
		slog.Error("restart after crash failed", "sandbox", sb.Name, "err", err)
		reason := "restart after crash failed: " + err.Error()
		logErr("mark crashed", m.cfg.Store.SetSandboxCrashed(ctx, sb.ID, reason, m.cfg.Now()), "sandbox", sb.Name)
		m.scheduleRestart(cur, reason)
		return
	}
	logErr("clear saved session", m.cfg.Store.SetResumeCheckpoint(ctx, sb.ID, ""), "sandbox", sb.Name)
	if err := m.cfg.Store.SetSandboxState(ctx, sb.ID, metadata.SandboxRunning); err != nil {
		logErr("mark running", err, "sandbox", sb.Name)
		return
	}
	slog.Info("sandbox running again after a crash", "sandbox", sb.Name)
}

// recordOOMKill records a process cairn-init killed when sb's memory ran
// out (cairn-init sends its last kill again on each new connection: one
// already recorded is dropped).
func (m *Manager) recordOOMKill(sb metadata.Sandbox, kill api.OOMKill) {
	ctx := context.Background()
	cur, err := m.cfg.Store.SandboxByID(ctx, sb.ID)
	if err != nil {
		return
	}
	at := kill.At.UTC().Truncate(time.Microsecond)
	if !cur.LastOOMKill.At.IsZero() && !at.After(cur.LastOOMKill.At) {
		return
	}
	what := fmt.Sprintf("pid %d (%s), %d MiB resident; %d of %d MiB in use", kill.PID, printable(kill.Command, 32),
		kill.RSSBytes>>20, kill.UsedBytes>>20, kill.LimitBytes>>20)
	slog.Warn("sandbox out of memory: cairn-init killed a process", "sandbox", sb.Name, "kill", what)
	logErr("record OOM kill", m.cfg.Store.SetLastOOMKill(ctx, sb.ID, what, at), "sandbox", sb.Name)
}

// printable keeps at most n runes of s that are printable ASCII, the rest
// replaced by '?': s comes from inside a sandbox.
func printable(s string, n int) string {
	var b strings.Builder
	for i, r := range s {
		if i >= n {
			break
		}
		if r < 0x20 || r > 0x7e {
			r = '?'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// downError explains why sandbox sb cannot answer: it crashed, or its
// cairn-init is not connected. S10.
func (r *runner) downError(ctx context.Context, sb metadata.Sandbox) error {
	cur, err := r.cfg.Store.SandboxByID(ctx, sb.ID)
	if errors.Is(err, metadata.ErrNotFound) {
		return errdefs.New(api.CodeNoSandbox, "no sandbox named %q", sb.Name)
	}
	if err == nil && cur.State == metadata.SandboxCrashed {
		then := "it stays crashed: start it with `cairn start " + sb.Name + "`"
		if cur.Restart != metadata.RestartNo && !strings.Contains(cur.LastCrash.What, "restart limit reached") {
			then = "cairnd starts it again from its disk shortly"
		}
		return errdefs.New(api.CodeSandboxDown, "sandbox %s crashed at %s: %s; %s", sb.Name,
			cur.LastCrash.At.Format(time.RFC3339), cur.LastCrash.What, then)
	}
	return errdefs.New(api.CodeSandboxDown, "sandbox %s: its cairn-init has not been connected for %s (see %s)",
		sb.Name, agentConnectWait, filepath.Join(r.sandboxDir(sb.ID), "console.log"))
}

// parseRestart parses a restart policy; "" is the default, on-failure.
func parseRestart(s string) (metadata.RestartPolicy, error) {
	if s == "" {
		return metadata.RestartOnFailure, nil
	}
	if p := metadata.RestartPolicy(s); p.Valid() {
		return p, nil
	}
	return "", errdefs.New(api.CodeInvalidArgument, "invalid restart policy %q: use on-failure, always or no", s)
}
