package sandbox

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Sleep when idle: a sandbox with --idle D that nothing has used for D (no
// exec starting or running, no port connection open or opened) goes to
// sleep: its session is saved (memory and disk, as cairn stop --snapshot)
// and it stops, with Settings.Asleep set, so the API shows it sleeping and
// its host memory is free. An exec or a port connection wakes it: the
// request waits while the session resumes, then goes through. The loop of
// lifetime.go decides when; what counts as use is kept here, in memory (a
// restarted cairnd counts from its start).

// wakeWait bounds how long a request waits for its sandbox to wake.
const wakeWait = 2 * time.Minute

// activity is when each sandbox was last used, how many sessions hold it
// awake now, and which are falling asleep (decided, not yet marked in
// the store): a hold taken then waits until the mark is written, so that
// its caller, reading the row next, sees it asleep and wakes it.
type activity struct {
	mu      sync.Mutex
	last    map[string]time.Time
	open    map[string]int
	falling map[string]bool
}

func (a *activity) init() {
	if a.last == nil {
		a.last, a.open, a.falling = map[string]time.Time{}, map[string]int{}, map[string]bool{}
	}
}

// touch records a use of sandbox id now.
func (m *Manager) touch(id string) {
	m.act.mu.Lock()
	defer m.act.mu.Unlock()
	m.act.init()
	m.act.last[id] = m.cfg.Now()
}

// hold keeps sandbox id awake until release is called (once). Take it
// before reading the sandbox's row: a sandbox is put to sleep only while
// nothing holds it.
func (m *Manager) hold(id string) (release func()) {
	for {
		m.act.mu.Lock()
		m.act.init()
		if !m.act.falling[id] {
			m.act.open[id]++
			m.act.last[id] = m.cfg.Now()
			m.act.mu.Unlock()
			break
		}
		m.act.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			m.act.mu.Lock()
			m.act.open[id]--
			if m.act.open[id] <= 0 {
				delete(m.act.open, id)
			}
			m.act.last[id] = m.cfg.Now()
			m.act.mu.Unlock()
		})
	}
}

// startFalling decides, under the activity lock, that sandbox id goes to
// sleep: nothing holds it and it has been unused for idle. It reports
// when it is due otherwise. A sandbox never seen counts from now.
func (m *Manager) startFalling(id string, idle time.Duration, now time.Time) (due time.Time, falls bool) {
	m.act.mu.Lock()
	defer m.act.mu.Unlock()
	m.act.init()
	last, seen := m.act.last[id]
	if !seen {
		m.act.last[id] = now
		return now.Add(idle), false
	}
	if m.act.open[id] > 0 {
		return now.Add(idle), false
	}
	if due := last.Add(idle); due.After(now) {
		return due, false
	}
	m.act.falling[id] = true
	return time.Time{}, true
}

// idleDue reports whether sandbox id is idle by now (nothing holds it and
// it has been unused for idle), and when it is due otherwise, without
// deciding anything (startFalling does).
func (m *Manager) idleDue(id string, idle time.Duration, now time.Time) (due time.Time, isIdle bool) {
	m.act.mu.Lock()
	defer m.act.mu.Unlock()
	last, seen := m.act.last[id]
	switch {
	case !seen:
		return now.Add(idle), true // startFalling counts from now
	case m.act.open[id] > 0:
		return now.Add(idle), false
	case last.Add(idle).After(now):
		return last.Add(idle), false
	}
	return time.Time{}, true
}

// runsInBackground reports whether sandbox sb's cairn-init has a
// background process that runs. A cairn-init that does not answer within
// runsWait has none that counts.
func (m *Manager) runsInBackground(ctx context.Context, sb metadata.Sandbox) bool {
	inst := m.run.cfg.Instances.get(sb.ID)
	if inst == nil || !inst.agent.Connected() {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, runsWait)
	defer cancel()
	list, err := inst.agent.Processes(ctx)
	if err != nil {
		slog.Debug("idle: list background processes", "sandbox", sb.Name, "err", err)
		return false
	}
	for _, p := range list {
		if p.Background && p.State == api.ProcessRunning {
			return true
		}
	}
	return false
}

// runsWait bounds how long the idle check waits for cairn-init's list of
// processes.
const runsWait = 2 * time.Second

// fallen ends what startFalling began: the mark is in the store (or the
// sleep was given up).
func (m *Manager) fallen(id string) {
	m.act.mu.Lock()
	defer m.act.mu.Unlock()
	delete(m.act.falling, id)
}

// forgetActivity drops what is kept of a deleted sandbox.
func (m *Manager) forgetActivity(id string) {
	m.act.mu.Lock()
	defer m.act.mu.Unlock()
	delete(m.act.last, id)
	delete(m.act.open, id)
	delete(m.act.falling, id)
}

// heldStream releases its hold when the stream closes.
type heldStream struct {
	io.ReadWriteCloser
	release func()
}

func (h heldStream) Close() error {
	defer h.release()
	return h.ReadWriteCloser.Close()
}

// sleepIfIdle puts sb to sleep when it has been idle past its --idle; it
// reports the time it is due otherwise (zero: no idle time, or asleep).
// The sandbox is marked asleep before its stop begins, so that a use
// arriving meanwhile wakes it again; a stop that fails leaves it awake
// (wakeIfAsleep clears the mark of a sandbox that runs).
func (m *Manager) sleepIfIdle(ctx context.Context, sb metadata.Sandbox, now time.Time) time.Time {
	if sb.Settings.Idle <= 0 || sb.State != metadata.SandboxRunning || sb.Settings.Asleep {
		return time.Time{}
	}
	if due, idle := m.idleDue(sb.ID, sb.Settings.Idle, now); !idle {
		return due
	}
	// A background process that runs is a use, as an attached exec is.
	if m.runsInBackground(ctx, sb) {
		m.touch(sb.ID)
		return now.Add(sb.Settings.Idle)
	}
	due, falls := m.startFalling(sb.ID, sb.Settings.Idle, now)
	if !falls {
		return due
	}
	// Holds wait until the stop holds the sandbox (fallen): a use then
	// finds it asleep or stopping, and wakes it once it has stopped.
	defer m.fallen(sb.ID)
	account, err := m.accountName(ctx, sb.AccountID)
	if err == nil {
		err = m.updateSettings(ctx, sb.ID, func(s *metadata.SandboxSettings) { s.Asleep = true })
	}
	if err != nil {
		slog.Warn("idle: mark the sandbox asleep", "sandbox", sb.Name, "err", err)
		return now.Add(lifetimeRetry)
	}
	slog.Info("sandbox idle: going to sleep (its session is saved)", "sandbox", sb.Name, "idle", sb.Settings.Idle)
	if _, err := m.Stop(ctx, account, sb.Name, api.StopRequest{Snapshot: true}); err != nil {
		// Busy with another operation: awake, and tried again.
		logErr("idle: undo asleep", m.updateSettings(ctx, sb.ID, func(s *metadata.SandboxSettings) { s.Asleep = false }), "sandbox", sb.Name)
		m.touch(sb.ID)
		return now.Add(lifetimeRetry)
	}
	return time.Time{}
}

// wakeIfAsleep starts sandbox sb if it sleeps (or is falling asleep) and
// waits until it runs again; a sandbox that is awake is left as it is.
func (m *Manager) wakeIfAsleep(ctx context.Context, account string, sb metadata.Sandbox) error {
	if !sb.Settings.Asleep {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, wakeWait)
	defer cancel()
	for {
		cur, err := m.cfg.Store.SandboxByID(ctx, sb.ID)
		if err != nil {
			return err
		}
		if !cur.Settings.Asleep {
			return nil
		}
		op, err := m.Start(ctx, account, sb.Name)
		switch {
		case err == nil:
			slog.Info("sandbox woken by a use", "sandbox", sb.Name)
			_, err = op.Wait(ctx)
			return err
		case errdefs.CodeOf(err) == api.CodeAlreadyRunning:
			// Nothing holds it and it runs: its sleep never came (the stop
			// failed), or it was started another way (restart, restore).
			// It is awake.
			return m.updateSettings(ctx, sb.ID, func(s *metadata.SandboxSettings) { s.Asleep = false })
		case errdefs.CodeOf(err) != api.CodeSandboxBusy:
			return err
		}
		select {
		case <-ctx.Done():
			return errdefs.Wrap(api.CodeSandboxBusy, errors.Join(ctx.Err(), err), "sandbox %s did not wake within %v", sb.Name, wakeWait)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
