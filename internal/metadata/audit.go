package metadata

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The audit log (schema version 17).

// AuditEntry is one change made through the API.
type AuditEntry struct {
	ID        int64     // assigned by the store, increasing: a later append has a greater id
	At        time.Time // zero given to AppendAudit: now
	AccountID int64     // the account it acted in; 0: the host's own (accounts, images), or an account deleted since
	Account   string    // the account's name, filled in by reads; "" when AccountID is 0
	TokenID   string    // the token the request carried; "" for the administrator's unix socket
	TokenName string
	Remote    string // "unix", or the client's IP:port
	Action    string // what was asked: "sandbox.create", "checkpoint.delete", "token.revoke"…
	Target    string // what it acted on: "web", "web/v3", a token id…; "" for none
	Outcome   string // "ok", or the API error code
	Detail    string
}

// Validate checks an entry given to AppendAudit for what the store relies
// on: an action, an outcome, no negative account id.
func (e AuditEntry) Validate() error {
	switch {
	case e.Action == "":
		return errors.New("invalid audit entry: empty action")
	case e.Outcome == "":
		return fmt.Errorf("invalid audit entry %s %q: empty outcome", e.Action, e.Target)
	case e.AccountID < 0:
		return fmt.Errorf("invalid audit entry %s %q: account %d", e.Action, e.Target, e.AccountID)
	}
	return nil
}

// AuditFilter says which entries Audit returns. The zero value: all.
type AuditFilter struct {
	AccountID int64     // only this account's; 0: every entry, the host's included
	Since     time.Time // only entries at or after it (in the store's precision); zero: all
	// Target keeps the entries whose Target is this, or starts with this
	// and "/" (so "web" keeps "web" and "web/v3", not "webapp"); "": all.
	Target string
	Limit  int // at most this many: the newest that match; 0: no limit
}

// AuditStore is the part of the Store that keeps the audit log, under
// the Store's guarantees (atomic, durable, sentinel errors). Entries are
// never changed: they are appended, and deleted by age (PruneAudit).
type AuditStore interface {
	// AppendAudit stores e and returns it as stored: with its ID, its At
	// (a zero At is set to now) and Account filled in. e must pass
	// e.Validate (else a plain error); ErrNotFound if e.AccountID is not
	// 0 and is no account.
	AppendAudit(ctx context.Context, e AuditEntry) (AuditEntry, error)
	// Audit returns the entries that match f, oldest first: by At, then
	// by ID. With f.Limit, the f.Limit newest of them (still oldest
	// first); a negative Limit is a plain error.
	Audit(ctx context.Context, f AuditFilter) ([]AuditEntry, error)
	// PruneAudit deletes the entries whose At is before before, and
	// returns how many it deleted.
	PruneAudit(ctx context.Context, before time.Time) (int64, error)
}
