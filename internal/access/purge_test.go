package access

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/auth"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// rowEmptier empties an account by deleting its rows, as the sandbox
// manager's deletes do in the end; gate, if set, holds it until closed.
type rowEmptier struct {
	store metadata.Store
	gate  chan struct{}
}

func (e rowEmptier) EmptyAccount(ctx context.Context, _ *operation.Op, account string) (int, int, error) {
	if e.gate != nil {
		<-e.gate
	}
	acct, err := e.store.AccountByName(ctx, account)
	if err != nil {
		return 0, 0, err
	}
	sbs, _ := e.store.ListSandboxes(ctx, acct.ID, metadata.SandboxFilter{})
	for _, sb := range sbs {
		if err := e.store.DeleteSandbox(ctx, sb.ID); err != nil {
			return 0, 0, err
		}
	}
	cks, _ := e.store.ListCheckpoints(ctx, acct.ID, metadata.CheckpointFilter{IncludeAuto: true})
	for _, ck := range cks {
		if err := e.store.DeleteCheckpoint(ctx, ck.ID); err != nil {
			return 0, 0, err
		}
	}
	return len(sbs), len(cks), nil
}

// A forced delete revokes the account's tokens, has it emptied, waits for
// the off-site copies of its checkpoints to be deleted and then deletes
// it. When those copies are not deleted in time it fails (R01) and leaves
// the account, its tokens revoked; run again once they are, it finishes.
// The default account and a missing one are refused; a second delete of
// an account being deleted is the running operation.
func TestPurgeAccount(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t)
	ops := operation.NewRegistry(ctx, time.Now)
	gate := make(chan struct{})
	s.purge = Purge{Ops: ops, Emptier: rowEmptier{store: s.store, gate: gate}, OffsiteWait: 300 * time.Millisecond}

	if _, err := s.PurgeAccount(ctx, metadata.DefaultAccount); errdefs.CodeOf(err) != api.CodeInvalidArgument {
		t.Errorf("the default account: %v", err)
	}
	if _, err := s.PurgeAccount(ctx, "nobody"); errdefs.CodeOf(err) != api.CodeNoAccount {
		t.Errorf("no account: %v", err)
	}
	s.CreateAccount(ctx, "team", 0)
	tok, _ := s.CreateToken(ctx, "team", "ci", auth.RoleMember, 0)
	acct, _ := s.store.AccountByName(ctx, "team")
	sb := metadata.Sandbox{ID: "00000000000000t1", AccountID: acct.ID, Name: "web", Image: "busybox", State: metadata.SandboxRunning,
		CPUs: 1, MemoryBytes: 256 << 20, DiskBytes: 1 << 30, Restart: metadata.RestartNo}
	if err := s.store.CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	ck := metadata.Checkpoint{ID: "ck-t1", AccountID: acct.ID, SandboxID: sb.ID, SandboxName: "web", Trigger: metadata.TriggerManual,
		Consistency: metadata.ConsistencyFrozen, Image: "busybox", RootGeneration: 1}
	if _, err := s.store.CreateCheckpoint(ctx, ck); err != nil {
		t.Fatal(err)
	}
	if err := s.store.SetCheckpointOffsite(ctx, ck.ID, "manifest-t1"); err != nil {
		t.Fatal(err)
	}

	op, err := s.PurgeAccount(ctx, "team")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := s.PurgeAccount(ctx, "team"); err != nil || again != op {
		t.Errorf("a second delete while the first runs: %v, %v", again, err)
	}
	close(gate)
	_, err = op.Wait(ctx)
	if errdefs.CodeOf(err) != api.CodeOffsiteUnavailable || !strings.Contains(err.Error(), "again") {
		t.Fatalf("with the off-site copy not deleted: %v, want R01 saying to run it again", err)
	}
	if _, err := s.store.AccountByName(ctx, "team"); err != nil {
		t.Fatalf("the account after the failed delete: %v", err)
	}
	if _, err := s.Authenticate(ctx, tok.Token, "x"); errdefs.CodeOf(err) != api.CodeUnauthenticated {
		t.Errorf("its token after the failed delete: %v, want revoked", err)
	}
	if left, _ := s.store.ListSandboxes(ctx, acct.ID, metadata.SandboxFilter{}); len(left) != 0 {
		t.Errorf("sandboxes left: %+v", left)
	}

	// The off-site service deletes the copy; the delete run again ends.
	if err := s.store.ForgetOffsiteDeletes(ctx, acct.ID, []string{"manifest-t1"}); err != nil {
		t.Fatal(err)
	}
	op, err = s.PurgeAccount(ctx, "team")
	if err != nil {
		t.Fatal(err)
	}
	res, err := op.Wait(ctx)
	if err != nil {
		t.Fatalf("run again: %v", err)
	}
	if got := res.(api.AccountDeleted); got != (api.AccountDeleted{Deleted: "team", Tokens: 1}) {
		t.Errorf("result %+v", got)
	}
	if _, err := s.store.AccountByName(ctx, "team"); err == nil {
		t.Error("the account is still there")
	}
	if _, err := s.PurgeAccount(ctx, "team"); errdefs.CodeOf(err) != api.CodeNoAccount {
		t.Errorf("once deleted: %v", err)
	}
}

// With the account's off-site copies off, the delete does not wait for
// deletes nobody would do; it tells who revoked which tokens, and who
// keeps the account's things outside the store.
func TestPurgeAccountOffsiteOff(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t)
	var revoked []string
	var forgot string
	s.purge = Purge{Ops: operation.NewRegistry(ctx, time.Now), Emptier: rowEmptier{store: s.store, gate: closedGate()}, OffsiteWait: time.Hour,
		OffsiteOn: func(metadata.Account) bool { return false },
		Revoked:   func(ids []string) { revoked = ids },
		Forget:    func(_ context.Context, a metadata.Account) { forgot = a.Name }}
	s.CreateAccount(ctx, "team", 0)
	tok, _ := s.CreateToken(ctx, "team", "ci", auth.RoleMember, 0)
	acct, _ := s.store.AccountByName(ctx, "team")
	sb := metadata.Sandbox{ID: "00000000000000t2", AccountID: acct.ID, Name: "web", Image: "busybox", State: metadata.SandboxStopped, Restart: metadata.RestartNo}
	if err := s.store.CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	ck := metadata.Checkpoint{ID: "ck-t2", AccountID: acct.ID, SandboxID: sb.ID, SandboxName: "web", Trigger: metadata.TriggerManual,
		Consistency: metadata.ConsistencyFrozen, Image: "busybox", OffsiteManifest: "manifest-t2"}
	if _, err := s.store.CreateCheckpoint(ctx, ck); err != nil {
		t.Fatal(err)
	}
	op, err := s.PurgeAccount(ctx, "team")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := op.Wait(wctx); err != nil {
		t.Fatalf("forced delete with off-site off: %v", err)
	}
	if len(revoked) != 1 || revoked[0] != tok.Info.ID || forgot != "team" {
		t.Errorf("revoked %v, forgot %q; want the token and the account", revoked, forgot)
	}
}

func closedGate() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}
