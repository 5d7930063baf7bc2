package access

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// Deleting an account that holds something (cairn account delete
// --force): an operation that revokes its tokens first (nothing new is
// made in it meanwhile, and their sessions end), deletes its sandboxes
// and checkpoints through the paths of single deletes (the Emptier),
// waits for the off-site copies of those checkpoints to be deleted, and
// then deletes the account with its tokens. Each step is complete before
// the next starts and skips what is gone already, so a delete that
// failed midway (a location that does not answer, cairnd stopped) leaves
// the account with what it still holds, its tokens revoked, and is
// finished by running it again.

// Emptier deletes what an account holds (the sandbox manager).
type Emptier interface {
	// EmptyAccount deletes every sandbox of account (stopping those that
	// run, without the final checkpoint of a single delete) and then
	// every checkpoint it has, snapshots and those of deleted sandboxes
	// included, each as a single delete does (its off-site copies queued
	// for deletion), reporting on op; it returns how many of each it
	// deleted. A sandbox busy with another operation is waited for.
	// Idempotent: run again after a failure, it deletes what is left.
	EmptyAccount(ctx context.Context, op *operation.Op, account string) (sandboxes, checkpoints int, err error)
}

// Purge is what forced deletes need.
type Purge struct {
	Ops     *operation.Registry
	Emptier Emptier
	// OffsiteWait bounds the wait for the off-site deletes; 0: 2 minutes.
	OffsiteWait time.Duration
	// Forget, if set, is told of each account deleted, to let go of what
	// is kept for it outside the store (its off-site service and default
	// repository directory, its build steps' cache entries).
	Forget func(ctx context.Context, acct metadata.Account)
	// Revoked, if set, is told the ids of the tokens the delete revoked,
	// once they are: the API server ends their sessions and refuses new
	// ones (a session opened between the request and the revoke).
	Revoked func(ids []string)
	// OffsiteOn, if set, says whether the account's off-site copies are
	// on; when they are off nothing would ever delete what its deleted
	// checkpoints left in its locations, and the delete does not wait.
	OffsiteOn func(acct metadata.Account) bool
}

// offsiteWait is how long a forced delete waits, by default, for the
// off-site copies of the account's checkpoints to be deleted.
const offsiteWait = 2 * time.Minute

// offsitePoll is how often it looks.
const offsitePoll = 200 * time.Millisecond

// PurgeAccount starts an operation (kind account.delete, resource
// account/NAME) that deletes account name and everything it holds; it
// completes with an api.AccountDeleted. The default account: V02; none
// called name: A04. A forced delete of the account already running is
// answered with its operation.
func (s *Service) PurgeAccount(ctx context.Context, name string) (*operation.Op, error) {
	if name == metadata.DefaultAccount {
		return nil, errdefs.New(api.CodeInvalidArgument, "the default account cannot be deleted")
	}
	if s.purge.Ops == nil || s.purge.Emptier == nil {
		return nil, errdefs.New(api.CodeInvalidRequest, "this cairnd deletes only empty accounts")
	}
	acct, err := s.account(ctx, name)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if op := s.purging[name]; op != nil {
		return op, nil
	}
	op := s.purge.Ops.Start("account.delete", "account/"+name, func(ctx context.Context, op *operation.Op) (any, error) {
		defer func() {
			s.mu.Lock()
			delete(s.purging, name)
			s.mu.Unlock()
		}()
		res, err := s.purgeAccount(ctx, op, acct)
		if err != nil {
			return nil, err
		}
		return res, nil
	})
	s.purging[name] = op
	return op, nil
}

// unfinished is the error of a forced delete that stopped midway.
func unfinished(name string, err error) error {
	return fmt.Errorf("account %s is not deleted, its tokens revoked; what it still holds stays (`cairn account delete %s --force` again finishes): %w", name, name, err)
}

func (s *Service) purgeAccount(ctx context.Context, op *operation.Op, acct metadata.Account) (api.AccountDeleted, error) {
	res := api.AccountDeleted{Deleted: acct.Name}
	op.Step(api.PhaseRevoke, "Revoking the tokens of account %s", acct.Name)
	tokens, err := s.store.Tokens(ctx, acct.ID)
	if err != nil {
		return res, err
	}
	for _, t := range tokens {
		if t.RevokedAt.IsZero() {
			if _, err := s.store.RevokeToken(ctx, t.ID, s.now()); err != nil && !errors.Is(err, metadata.ErrNotFound) {
				return res, err
			}
		}
	}
	res.Tokens = len(tokens)
	if s.purge.Revoked != nil {
		ids := make([]string, 0, len(tokens))
		for _, t := range tokens {
			ids = append(ids, t.ID)
		}
		s.purge.Revoked(ids)
	}
	res.Sandboxes, res.Checkpoints, err = s.purge.Emptier.EmptyAccount(ctx, op, acct.Name)
	if err != nil {
		return res, unfinished(acct.Name, err)
	}
	if err := s.waitOffsiteDeletes(ctx, op, acct); err != nil {
		return res, unfinished(acct.Name, err)
	}
	op.Step(api.PhaseDelete, "Deleting account %s with its %d tokens", acct.Name, len(tokens))
	switch err := s.store.DeleteAccount(ctx, acct.Name); {
	case errors.Is(err, metadata.ErrNotFound):
		// Deleted meanwhile (it was empty): done all the same.
	case errors.Is(err, metadata.ErrConflict):
		return res, unfinished(acct.Name, errdefs.Wrap(api.CodeAccountNotEmpty, err, "something was made in it while it was emptied"))
	case err != nil:
		return res, unfinished(acct.Name, err)
	}
	if s.purge.Forget != nil {
		s.purge.Forget(ctx, acct)
	}
	op.Step(api.PhaseDone, "Deleted account %s: %d sandboxes, %d checkpoints, %d tokens", acct.Name, res.Sandboxes, res.Checkpoints, res.Tokens)
	return res, nil
}

// waitOffsiteDeletes waits until the account's off-site service has
// deleted the manifests of its deleted checkpoints from its locations
// (metadata.Store.OffsiteDeletes is empty), at most purge.OffsiteWait:
// R01 past that.
func (s *Service) waitOffsiteDeletes(ctx context.Context, op *operation.Op, acct metadata.Account) error {
	if s.purge.OffsiteOn != nil && !s.purge.OffsiteOn(acct) {
		queued, err := s.store.OffsiteDeletes(ctx, acct.ID)
		if err != nil || len(queued) == 0 {
			return err
		}
		slog.Warn("account deleted with its off-site copies off: what its checkpoints left in its locations stays there",
			"account", acct.Name, "manifests", len(queued))
		return s.store.ForgetOffsiteDeletes(ctx, acct.ID, queued)
	}
	deadline := time.Now().Add(s.purge.OffsiteWait)
	said := false
	for {
		queued, err := s.store.OffsiteDeletes(ctx, acct.ID)
		if err != nil {
			return err
		}
		if len(queued) == 0 {
			return nil
		}
		if !said {
			op.Step(api.PhaseOffsite, "Waiting for the off-site copies of %d deleted checkpoints to be deleted", len(queued))
			said = true
		}
		if time.Now().After(deadline) {
			return errdefs.New(api.CodeOffsiteUnavailable, "the off-site copies of %d deleted checkpoints were not deleted within %v (does every location answer? `cairn account` and cairnd's log say)", len(queued), s.purge.OffsiteWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(offsitePoll):
		}
	}
}
