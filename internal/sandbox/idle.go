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

// activity is when each sandbox was last used and how many sessions
// hold it awake now.
type activity struct {
	mu   sync.Mutex
	last map[string]time.Time
	open map[string]int
}

// touch records a use of sandbox id now.
func (m *Manager) touch(id string) {
	m.act.mu.Lock()
	defer m.act.mu.Unlock()
	if m.act.last == nil {
		m.act.last, m.act.open = map[string]time.Time{}, map[string]int{}
	}
	m.act.last[id] = m.cfg.Now()
}

// hold keeps sandbox id awake until release is called (once).
func (m *Manager) hold(id string) (release func()) {
	m.touch(id)
	m.act.mu.Lock()
	m.act.open[id]++
	m.act.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			m.act.mu.Lock()
			m.act.open[id]--
			if m.act.open[id] <= 0 {
				delete(m.act.open, id)
			}
			m.act.mu.Unlock()
			m.touch(id)
		})
	}
}

// idleSince says since when sandbox id has been unused; ok is false while
// a session holds it. One never seen counts from now.
func (m *Manager) idleSince(id string) (since time.Time, ok bool) {
	m.act.mu.Lock()
	last, seen := m.act.last[id]
	busy := m.act.open[id] > 0
	m.act.mu.Unlock()
	if !seen {
		m.touch(id)
		return m.cfg.Now(), true
	}
	return last, !busy
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
// reports the time it is due otherwise (zero: no idle time).
func (m *Manager) sleepIfIdle(ctx context.Context, sb metadata.Sandbox, now time.Time) time.Time {
	if sb.Settings.Idle <= 0 || sb.State != metadata.SandboxRunning {
		return time.Time{}
	}
	since, ok := m.idleSince(sb.ID)
	due := since.Add(sb.Settings.Idle)
	if !ok {
		return now.Add(sb.Settings.Idle)
	}
	if due.After(now) {
		return due
	}
	account, err := m.accountName(ctx, sb.AccountID)
	if err != nil {
		return now.Add(lifetimeRetry)
	}
	set := sb.Settings
	set.Asleep = true
	if err := m.cfg.Store.SetSandboxSettings(ctx, sb.ID, set); err != nil {
		slog.Warn("idle: mark the sandbox asleep", "sandbox", sb.Name, "err", err)
		return now.Add(lifetimeRetry)
	}
	slog.Info("sandbox idle: going to sleep (its session is saved)", "sandbox", sb.Name, "idle", sb.Settings.Idle)
	if _, err := m.Stop(ctx, account, sb.Name, api.StopRequest{Snapshot: true}); err != nil {
		// Busy with another operation: awake, and tried again.
		set.Asleep = false
		logErr("idle: undo asleep", m.cfg.Store.SetSandboxSettings(ctx, sb.ID, set), "sandbox", sb.Name)
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
		if !cur.Settings.Asleep && cur.State == metadata.SandboxRunning {
			return nil
		}
		op, err := m.Start(ctx, account, sb.Name)
		switch {
		case err == nil:
			slog.Info("sandbox woken by a use", "sandbox", sb.Name)
			_, err = op.Wait(ctx)
			return err
		case errdefs.CodeOf(err) == api.CodeAlreadyRunning:
			// Still falling asleep, or woken by another request: look
			// again once the operation holding it is done.
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
