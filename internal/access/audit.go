package access

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/auth"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// AuditKeep is how long audit entries are kept.
const AuditKeep = 90 * 24 * time.Hour

// Record implements server.Auditor: the entry goes in the account of c
// (the host's own actions, on accounts, tokens and every account's
// images, in none).
func (s *Service) Record(ctx context.Context, c auth.Credential, e api.AuditEntry) error {
	rec := metadata.AuditEntry{At: s.now(), TokenID: c.TokenID, TokenName: c.TokenName, Remote: c.Remote,
		Action: e.Action, Target: e.Target, Outcome: e.Outcome, Detail: e.Detail}
	if !hostWide(e.Action) {
		acct, err := s.store.AccountByName(ctx, c.Account)
		if err != nil && !errors.Is(err, metadata.ErrNotFound) {
			return err
		}
		rec.AccountID = acct.ID
	}
	_, err := s.store.AppendAudit(ctx, rec)
	return err
}

// hostWide reports whether an action is on what the host shares.
func hostWide(action string) bool {
	switch action {
	case "image.delete", "image.prune", "account.create", "account.set", "account.delete", "token.create", "token.revoke":
		return true
	}
	return false
}

// Entries implements server.Auditor: a read or member token sees its
// account's entries; an admin token and the unix socket, who manage the
// host, every one.
func (s *Service) Entries(ctx context.Context, c auth.Credential, q api.AuditQuery) ([]api.AuditEntry, error) {
	f := metadata.AuditFilter{Since: q.Since, Target: q.Target, Limit: q.Limit}
	if c.TokenID != "" && c.Role != auth.RoleAdmin {
		acct, err := s.store.AccountByName(ctx, c.Account)
		if err != nil {
			return nil, err
		}
		f.AccountID = acct.ID
	}
	list, err := s.store.Audit(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]api.AuditEntry, 0, len(list))
	for _, e := range list {
		out = append(out, api.AuditEntry{ID: e.ID, At: e.At, Account: e.Account, TokenID: e.TokenID, TokenName: e.TokenName,
			Remote: e.Remote, Action: e.Action, Target: e.Target, Outcome: e.Outcome, Detail: e.Detail})
	}
	return out, nil
}

// PruneAudit runs until ctx ends, deleting audit entries older than
// AuditKeep once an hour (and once at start).
func (s *Service) PruneAudit(ctx context.Context) {
	for {
		if n, err := s.store.PruneAudit(ctx, s.now().Add(-AuditKeep)); err != nil && ctx.Err() == nil {
			slog.Warn("audit: pruning old entries failed", "err", err)
		} else if n > 0 {
			slog.Info("audit: old entries deleted", "entries", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Hour):
		}
	}
}
