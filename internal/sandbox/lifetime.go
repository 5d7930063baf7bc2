package sandbox

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// Lifetimes: the loop here also puts idle sandboxes to sleep (idle.go).
//
// A sandbox created with --timeout runs at most that long at a
// time. Its deadline (SandboxSettings.Deadline) is set at each start, and
// from now by cairn config --timeout; the lifetime loop ends it there with
// its --on-timeout: stopped, deleted (with the final checkpoint) or its
// session saved. The deadline is in the store, so a restarted cairnd keeps
// it, and one that passed while cairnd was down is acted on at its start.

// lifetimeRetry is how soon an action that failed (the sandbox was busy
// with another operation) is tried again.
const lifetimeRetry = 5 * time.Second

// lifetimeIdle bounds how long the loop sleeps with no deadline nearer
// (a deadline set by another host, or one it was not woken for).
const lifetimeIdle = 5 * time.Second

// parseTimeout reads a --timeout ("0" or "0s": none) and an --on-timeout.
func parseTimeout(timeout, onTimeout string) (time.Duration, string, error) {
	var d time.Duration
	if timeout != "" && timeout != "0" {
		var err error
		if d, err = time.ParseDuration(timeout); err != nil {
			return 0, "", errdefs.New(api.CodeInvalidArgument, "timeout %q: a duration such as 30s, 15m or 2h", timeout)
		}
		if d != 0 && (d < api.MinTimeout || d > api.MaxTimeout) {
			return 0, "", errdefs.New(api.CodeInvalidArgument, "timeout %s: from %s to %s", d, api.MinTimeout, api.MaxTimeout)
		}
	}
	switch onTimeout {
	case "", metadata.OnTimeoutStop, metadata.OnTimeoutDelete, metadata.OnTimeoutSave:
	default:
		return 0, "", errdefs.New(api.CodeInvalidArgument, "on-timeout %q: stop, delete or save", onTimeout)
	}
	return d, onTimeout, nil
}

// armed returns set with its deadline from now, if it has a timeout.
func armed(set metadata.SandboxSettings, now time.Time) metadata.SandboxSettings {
	set.Deadline = time.Time{}
	if set.Timeout > 0 {
		set.Deadline = now.Add(set.Timeout)
	}
	return set
}

// rearm, at each start of sb's container, counts its timeout from now and
// marks it awake, and wakes the loop. A sandbox being created has no row
// yet: its create arms it.
func (m *Manager) rearm(ctx context.Context, sb metadata.Sandbox) {
	m.touch(sb.ID)
	err := m.updateSettings(ctx, sb.ID, func(s *metadata.SandboxSettings) {
		*s = armed(*s, m.cfg.Now())
		s.Asleep = false
	})
	if err != nil && !errors.Is(err, metadata.ErrNotFound) {
		logErr("set the timeout's deadline", err, "sandbox", sb.Name)
	}
	m.wakeLifetimes()
}

// wakeLifetimes tells the loop that a deadline changed.
func (m *Manager) wakeLifetimes() {
	select {
	case m.lifeWake <- struct{}{}:
	default:
	}
}

// RunLifetimes ends the sandboxes whose timeout passed until ctx ends.
func (m *Manager) RunLifetimes(ctx context.Context) {
	for {
		next := m.endExpired(ctx)
		wait := lifetimeIdle
		if !next.IsZero() {
			wait = min(max(next.Sub(m.cfg.Now()), 0), lifetimeIdle)
		}
		select {
		case <-ctx.Done():
			return
		case <-m.lifeWake:
		case <-time.After(wait):
		}
	}
}

// endExpired acts on every running sandbox past its deadline and returns
// the nearest deadline still to come (zero: none).
func (m *Manager) endExpired(ctx context.Context) time.Time {
	sbs, err := m.cfg.Store.AllSandboxes(ctx)
	if err != nil {
		slog.Warn("lifetimes: list sandboxes", "err", err)
		return m.cfg.Now().Add(lifetimeRetry)
	}
	sbs = mineOnly(m.cfg, sbs)
	now := m.cfg.Now()
	var next time.Time
	for _, sb := range sbs {
		if due := m.sleepIfIdle(ctx, sb, now); !due.IsZero() && (next.IsZero() || due.Before(next)) {
			next = due
		}
		d := sb.Settings.Deadline
		if d.IsZero() || sb.State != metadata.SandboxRunning {
			continue
		}
		if d.After(now) {
			if next.IsZero() || d.Before(next) {
				next = d
			}
			continue
		}
		// Each action on its own: one that waits for a busy sandbox does
		// not hold up the others. The deadline stays in the row: a
		// stopped or deleted sandbox is passed over, one whose action
		// failed is tried again.
		if retry := now.Add(lifetimeRetry); next.IsZero() || retry.Before(next) {
			next = retry
		}
		if _, busy := m.lifeBusy.LoadOrStore(sb.ID, true); busy {
			continue
		}
		go func() {
			defer m.lifeBusy.Delete(sb.ID)
			if err := m.endOfLife(ctx, sb); err != nil {
				slog.Warn("lifetimes: the timeout's action failed; tried again soon", "sandbox", sb.Name, "err", err)
			}
		}()
	}
	return next
}

// endOfLife does sb's --on-timeout and waits for it. The deadline is read
// again first: a config --timeout just before it moved it.
func (m *Manager) endOfLife(ctx context.Context, sb metadata.Sandbox) error {
	cur, err := m.cfg.Store.SandboxByID(ctx, sb.ID)
	if err != nil || cur.State != metadata.SandboxRunning || cur.Settings.Deadline.IsZero() || cur.Settings.Deadline.After(m.cfg.Now()) {
		return nil
	}
	sb = cur
	account, err := m.accountName(ctx, sb.AccountID)
	if err != nil {
		return err
	}
	action := sb.Settings.OnTimeout
	if action == "" {
		action = metadata.OnTimeoutStop
	}
	slog.Info("sandbox timeout reached", "sandbox", sb.Name, "timeout", sb.Settings.Timeout, "action", action)
	var op *operation.Op
	switch action {
	case metadata.OnTimeoutDelete:
		op, err = m.Delete(ctx, account, sb.Name)
	default:
		op, err = m.Stop(ctx, account, sb.Name, api.StopRequest{Snapshot: action == metadata.OnTimeoutSave})
	}
	if err != nil {
		return err
	}
	_, err = op.Wait(ctx)
	return err
}

func (m *Manager) accountName(ctx context.Context, id int64) (string, error) {
	a, err := metadata.AccountByID(ctx, m.cfg.Store, id)
	return a.Name, err
}
