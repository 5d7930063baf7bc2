package catalog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/checkpoint"
	"github.com/cairn-sandbox/cairn/internal/disks"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/lease"
	"github.com/cairn-sandbox/cairn/internal/localtier"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// findCheckpoint returns sandbox sb's checkpoint with the per-sandbox id
// (v3, auto-…) or the account-wide id ref.
func (c *Catalog) findCheckpoint(ctx context.Context, sb metadata.Sandbox, ref string) (metadata.Checkpoint, error) {
	if ref == LatestCheckpoint {
		ck, err := c.cfg.Store.LatestCheckpoint(ctx, sb.ID)
		if errors.Is(err, metadata.ErrNotFound) {
			return ck, errdefs.New(api.CodeNoCheckpoint, "sandbox %s has no checkpoint yet", sb.Name)
		}
		return ck, err
	}
	ck, err := c.cfg.Store.CheckpointBySeq(ctx, sb.ID, ref)
	if errors.Is(err, metadata.ErrNotFound) {
		ck, err = c.cfg.Store.CheckpointByID(ctx, ref)
		if err == nil && ck.SandboxID != sb.ID {
			err = metadata.ErrNotFound
		}
	}
	if errors.Is(err, metadata.ErrNotFound) {
		return ck, errdefs.New(api.CodeNoCheckpoint, "sandbox %s has no checkpoint %q (see `cairn checkpoint list %s`)", sb.Name, ref, sb.Name)
	}
	return ck, err
}

// resolveSnapshot finds a checkpoint named account-wide: its global id, its
// snapshot name, or SANDBOX/ID.
func (c *Catalog) resolveSnapshot(ctx context.Context, acct metadata.Account, ref string) (metadata.Checkpoint, error) {
	notFound := errdefs.New(api.CodeNoCheckpoint, "no checkpoint or snapshot %q in your account", ref)
	if sbName, seq, ok := strings.Cut(ref, "/"); ok {
		sb, err := c.cfg.Store.SandboxByName(ctx, acct.ID, sbName)
		if errors.Is(err, metadata.ErrNotFound) {
			return c.deletedSandboxCheckpoint(ctx, acct, sbName, seq, notFound)
		} else if err != nil {
			return metadata.Checkpoint{}, err
		}
		ck, err := c.cfg.Store.CheckpointBySeq(ctx, sb.ID, seq)
		if errors.Is(err, metadata.ErrNotFound) {
			return ck, notFound
		}
		return ck, err
	}
	ck, err := c.cfg.Store.CheckpointByName(ctx, acct.ID, ref)
	if errors.Is(err, metadata.ErrNotFound) {
		ck, err = c.cfg.Store.CheckpointByID(ctx, ref)
		if err == nil && ck.AccountID != acct.ID {
			err = metadata.ErrNotFound
		}
	}
	if errors.Is(err, metadata.ErrNotFound) {
		return ck, notFound
	}
	return ck, err
}

// deletedSandboxCheckpoint finds checkpoint seq of a deleted sandbox that
// was called sbName. Several deleted sandboxes may have had that name and a
// checkpoint of that id: then only the global id tells them apart.
func (c *Catalog) deletedSandboxCheckpoint(ctx context.Context, acct metadata.Account, sbName, seq string, notFound error) (metadata.Checkpoint, error) {
	all, err := c.cfg.Store.ListCheckpoints(ctx, acct.ID, metadata.CheckpointFilter{IncludeAuto: true})
	if err != nil {
		return metadata.Checkpoint{}, err
	}
	var found []metadata.Checkpoint
	for _, ck := range all {
		if ck.SandboxName == sbName && ck.Seq == seq {
			found = append(found, ck)
		}
	}
	switch len(found) {
	case 0:
		return metadata.Checkpoint{}, notFound
	case 1:
		return found[0], nil
	}
	return metadata.Checkpoint{}, errdefs.New(api.CodeInvalidArgument,
		"%d deleted sandboxes called %s had a checkpoint %s: give its global id (cairn snapshot list)", len(found), sbName, seq)
}

// checkpointView turns a stored checkpoint into its API form; usage may be
// nil (sizes then stay zero).
func (c *Catalog) checkpointView(sb metadata.Sandbox, ck metadata.Checkpoint, usage *disks.Usage) api.Checkpoint {
	out := api.Checkpoint{
		ID: ck.Seq, GlobalID: ck.ID, Sandbox: ck.SandboxName, Name: ck.Name, Trigger: ck.Trigger,
		Consistency: ck.Consistency, Comment: ck.Comment, Label: ck.Label, HasMemory: ck.HasMemory,
		Image: ck.Image, CreatedAt: ck.CreatedAt, Current: sb.CurrentCheckpoint == ck.ID, FromInside: ck.FromInside,
	}
	out.Offsite, out.OffsiteDetail = c.offsiteStatus(ck)
	out.Stored = c.storedOf(ck)
	if usage != nil {
		out.SizeExclusive, out.SizeTotal = usage.Checkpoint(ck)
	}
	return out
}

// Checkpoints lists the checkpoints of the sandbox called name, oldest
// first; automatic ones only with includeAuto.
func (c *Catalog) Checkpoints(ctx context.Context, account, name string, includeAuto bool) ([]api.Checkpoint, error) {
	acct, sb, err := c.lookup(ctx, account, name)
	if err != nil {
		return nil, err
	}
	rows, err := c.cfg.Store.ListCheckpoints(ctx, acct.ID, metadata.CheckpointFilter{SandboxID: sb.ID, IncludeAuto: includeAuto})
	if err != nil {
		return nil, err
	}
	usage, err := c.cfg.Disks.Usage(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.Checkpoint, 0, len(rows))
	for _, ck := range rows {
		out = append(out, c.checkpointView(sb, ck, &usage))
	}
	return out, nil
}

// Checkpoint returns one checkpoint of the sandbox called name.
func (c *Catalog) Checkpoint(ctx context.Context, account, name, ref string) (api.Checkpoint, error) {
	_, sb, err := c.lookup(ctx, account, name)
	if err != nil {
		return api.Checkpoint{}, err
	}
	ck, err := c.findCheckpoint(ctx, sb, ref)
	if err != nil {
		return api.Checkpoint{}, err
	}
	usage, err := c.cfg.Disks.Usage(ctx)
	if err != nil {
		return api.Checkpoint{}, err
	}
	return c.checkpointView(sb, ck, &usage), nil
}

// DeleteCheckpoint deletes a checkpoint of the sandbox called name and
// frees its space before returning. A sandbox's current checkpoint cannot
// be deleted.
func (c *Catalog) DeleteCheckpoint(ctx context.Context, account, name, ref string) error {
	_, sb, err := c.lookup(ctx, account, name)
	if err != nil {
		return err
	}
	ck, err := c.findCheckpoint(ctx, sb, ref)
	if err != nil {
		return err
	}
	return c.deleteCheckpoint(ctx, ck)
}

// KeepCheckpoint makes checkpoint ref of the sandbox called name one the
// operator keeps: made from inside, it no longer counts toward the
// sandbox's --inside-keep and is never deleted for it. Keeping any other
// checkpoint changes nothing. It returns the checkpoint as it now is.
func (c *Catalog) KeepCheckpoint(ctx context.Context, account, name, ref string) (api.Checkpoint, error) {
	_, sb, err := c.lookup(ctx, account, name)
	if err != nil {
		return api.Checkpoint{}, err
	}
	ck, err := c.findCheckpoint(ctx, sb, ref)
	if err != nil {
		return api.Checkpoint{}, err
	}
	if ck.FromInside {
		// Under the sandbox's lease, as pruning deletes: a prune that
		// chose ck before it was kept reads it again and spares it.
		l, err := c.queue(ctx, sb, lease.PurposeCheckpoint)
		if err != nil {
			return api.Checkpoint{}, err
		}
		err = c.cfg.Store.KeepCheckpoint(ctx, ck.ID)
		c.release(l)
		if errors.Is(err, metadata.ErrNotFound) {
			return api.Checkpoint{}, errdefs.New(api.CodeNoCheckpoint, "sandbox %s has no checkpoint %q (see `cairn checkpoint list %s`)", sb.Name, ref, sb.Name)
		} else if err != nil {
			return api.Checkpoint{}, err
		}
		ck.FromInside = false
	}
	usage, err := c.cfg.Disks.Usage(ctx)
	if err != nil {
		return api.Checkpoint{}, err
	}
	return c.checkpointView(sb, ck, &usage), nil
}

// PruneFromInside deletes ck, a checkpoint made from inside its sandbox
// that its policy no longer keeps, unless, read again under the sandbox's
// lease, it is gone, named or kept by the operator (KeepCheckpoint) by
// then. It reports whether it deleted it.
func (c *Catalog) PruneFromInside(ctx context.Context, ck metadata.Checkpoint) (bool, error) {
	return c.deleteCheckpointIf(ctx, ck, func(cur metadata.Checkpoint) bool {
		return cur.FromInside && cur.Name == ""
	})
}

// deleteCheckpoint deletes ck, queued behind whatever holds its sandbox
// (if the sandbox still exists), and refreshes what the sandbox browses.
func (c *Catalog) deleteCheckpoint(ctx context.Context, ck metadata.Checkpoint) error {
	_, err := c.deleteCheckpointIf(ctx, ck, nil)
	return err
}

// deleteCheckpointIf is deleteCheckpoint, but when still is not nil it
// reads ck again once it holds the sandbox's lease and deletes it only if
// it still exists and still(it) holds. It reports whether it deleted it.
func (c *Catalog) deleteCheckpointIf(ctx context.Context, ck metadata.Checkpoint, still func(metadata.Checkpoint) bool) (bool, error) {
	sb, err := c.cfg.Store.SandboxByID(ctx, ck.SandboxID)
	if err != nil && !errors.Is(err, metadata.ErrNotFound) {
		return false, err
	}
	if sb.ID != "" {
		l, err := c.queue(ctx, sb, lease.PurposeCheckpoint)
		if err != nil {
			return false, err
		}
		defer c.release(l)
	}
	if still != nil {
		cur, err := c.cfg.Store.CheckpointByID(ctx, ck.ID)
		if errors.Is(err, metadata.ErrNotFound) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		if !still(cur) {
			return false, nil
		}
		ck = cur
	}
	if err := c.cfg.Disks.Delete(ctx, ck); err != nil {
		return false, err
	}
	c.offsiteChanged() // its manifest goes from the locations too
	if sb.ID != "" {
		// Read again under the lease: a delete of the sandbox may have run
		// while this one queued, and its view must not come back.
		if cur, err := c.cfg.Store.SandboxByID(ctx, sb.ID); err == nil {
			c.publish(ctx, cur) // the next newest checkpoint (if any) becomes browsable
		}
	}
	return true, nil
}

// Diff lists what differs between checkpoint from and checkpoint to of the
// sandbox called name, or its current disk when to is "".
func (c *Catalog) Diff(ctx context.Context, account, name, from, to string) ([]api.DiffEntry, error) {
	fromPath, toPath, done, err := c.diffTrees(ctx, account, name, from, to)
	if err != nil {
		return nil, err
	}
	defer done()
	changes, err := checkpoint.Diff(ctx, fromPath, toPath)
	if err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	out := make([]api.DiffEntry, 0, len(changes))
	for _, c := range changes {
		e := api.DiffEntry{Path: c.Path, Kind: c.Kind, What: c.What, Mode: c.Mode}
		if !utf8.ValidString(c.Path) {
			e.Path, e.PathBytes = strings.ToValidUTF8(c.Path, "\uFFFD"), []byte(c.Path)
		}
		out = append(out, e)
	}
	return out, nil
}

// diffTrees holds the two trees a diff compares, checkpoint from and
// checkpoint to ("": the current disk) of the sandbox called name, until
// done is called.
func (c *Catalog) diffTrees(ctx context.Context, account, name, from, to string) (fromPath, toPath string, done func(), err error) {
	_, sb, err := c.lookup(ctx, account, name)
	if err != nil {
		return "", "", nil, err
	}
	if from == "" {
		return "", "", nil, errdefs.New(api.CodeInvalidArgument, "diff needs a checkpoint to compare from")
	}
	a, err := c.findCheckpoint(ctx, sb, from)
	if err != nil {
		return "", "", nil, err
	}
	var releases []func()
	done = func() {
		for i := len(releases) - 1; i >= 0; i-- {
			releases[i]()
		}
	}
	defer func() {
		if err != nil {
			done()
		}
	}()
	if to == "" {
		// The root stays in place meanwhile: a restore waits. Taken
		// before the checkpoint's lease, in the order everything else
		// takes them.
		l, err := c.queue(ctx, sb, lease.PurposeDiff)
		if err != nil {
			return "", "", nil, err
		}
		releases = append(releases, func() { c.release(l) })
	}
	ha, err := c.cfg.Disks.Open(ctx, a, disks.PurposeDiff)
	if err != nil {
		return "", "", nil, localGone(err, "diff from %s", a.Seq)
	}
	releases = append(releases, ha.Release)
	fromPath, toPath = ha.Disk, c.cfg.Pool.SandboxPath(sb.ID)
	if to != "" {
		b, err := c.findCheckpoint(ctx, sb, to)
		if err != nil {
			return "", "", nil, err
		}
		hb, err := c.cfg.Disks.Open(ctx, b, disks.PurposeDiff)
		if err != nil {
			return "", "", nil, localGone(err, "diff to %s", b.Seq)
		}
		releases = append(releases, hb.Release)
		toPath = hb.Disk
	}
	return fromPath, toPath, done, nil
}

// diskUsage returns what a sandbox's root and its checkpoints alone hold.
func (c *Catalog) diskUsage(ctx context.Context, sb metadata.Sandbox) (*api.DiskUsage, error) {
	usage, err := c.cfg.Disks.Usage(ctx)
	if err != nil {
		return nil, err
	}
	cks, err := c.cfg.Store.ListCheckpoints(ctx, sb.AccountID, metadata.CheckpointFilter{SandboxID: sb.ID, IncludeAuto: true})
	if err != nil {
		return nil, err
	}
	du := &api.DiskUsage{Sandbox: usage.Root(sb.ID), Used: usage.RootUsed(sb.ID), CheckpointCount: len(cks)}
	for _, ck := range cks {
		excl, _ := usage.Checkpoint(ck)
		du.Checkpoints += excl
	}
	return du, nil
}

// Snapshots lists every checkpoint of the account (manual, named and
// automatic), those of deleted sandboxes included, oldest first.
func (c *Catalog) Snapshots(ctx context.Context, account string) ([]api.Checkpoint, error) {
	acct, err := c.cfg.Store.AccountByName(ctx, account)
	if err != nil {
		return nil, err
	}
	rows, err := c.cfg.Store.ListCheckpoints(ctx, acct.ID, metadata.CheckpointFilter{IncludeAuto: true})
	if err != nil {
		return nil, err
	}
	usage, err := c.cfg.Disks.Usage(ctx)
	if err != nil {
		return nil, err
	}
	sandboxes := map[string]metadata.Sandbox{}
	out := []api.Checkpoint{}
	for _, ck := range rows {
		sb, ok := sandboxes[ck.SandboxID]
		if !ok {
			sb, err = c.cfg.Store.SandboxByID(ctx, ck.SandboxID)
			if err != nil && !errors.Is(err, metadata.ErrNotFound) {
				return nil, err
			}
			sandboxes[ck.SandboxID] = sb
		}
		v := c.checkpointView(sb, ck, &usage)
		v.SandboxDeleted = sb.ID == ""
		out = append(out, v)
	}
	return out, nil
}

// DeleteSnapshot deletes a checkpoint named account-wide (global id,
// snapshot name or SANDBOX/ID), also one of a deleted sandbox.
func (c *Catalog) DeleteSnapshot(ctx context.Context, account, ref string) (api.Checkpoint, error) {
	acct, err := c.cfg.Store.AccountByName(ctx, account)
	if err != nil {
		return api.Checkpoint{}, err
	}
	ck, err := c.resolveSnapshot(ctx, acct, ref)
	if err != nil {
		return api.Checkpoint{}, err
	}
	if err := c.deleteCheckpoint(ctx, ck); err != nil {
		return api.Checkpoint{}, err
	}
	return c.checkpointView(metadata.Sandbox{}, ck, nil), nil
}

// storedOf says where ck's disk lives (api.Checkpoint.Stored): off-site
// is both locations holding it.
func (c *Catalog) storedOf(ck metadata.Checkpoint) string {
	svc := c.offsiteOf(ck.AccountID)
	switch {
	case ck.DiskPath != "" && ck.OffsiteManifest != "" && svc != nil && svc.Complete(ck):
		return api.StoredLocalAndOffsite
	case ck.DiskPath != "":
		return api.StoredLocalOnly
	case ck.OffsiteManifest != "":
		return api.StoredOffsiteOnly
	}
	return api.StoredLost
}

// EvictCheckpoint drops the local copy of one checkpoint of the sandbox
// called name, by hand: only one both off-site locations hold, never a
// current one (package localtier says which may go). From then on it
// restores from off-site.
func (c *Catalog) EvictCheckpoint(ctx context.Context, account, name, ref string) (api.Checkpoint, error) {
	acct, sb, err := c.lookup(ctx, account, name)
	if err != nil {
		return api.Checkpoint{}, err
	}
	ck, err := c.findCheckpoint(ctx, sb, ref)
	if err != nil {
		return api.Checkpoint{}, err
	}
	if ck.DiskPath != "" {
		sbs, err := c.cfg.Store.ListSandboxes(ctx, acct.ID, metadata.SandboxFilter{})
		if err != nil {
			return api.Checkpoint{}, err
		}
		var both func(metadata.Checkpoint) bool
		if svc := c.offsiteOf(acct.ID); svc != nil {
			both = svc.Complete
		}
		switch why := localtier.Refuse(ck, sbs, both); why {
		case "":
		case localtier.Current, localtier.Resumes:
			return api.Checkpoint{}, errdefs.New(api.CodeCheckpointCurrent, "the local copy of checkpoint %s stays: %s", ck.Seq, why)
		default:
			return api.Checkpoint{}, errdefs.New(api.CodeNotOffsite, "the local copy of checkpoint %s stays: %s (cairn checkpoint info %s %s shows its off-site state)", ck.Seq, why, sb.Name, ck.Seq)
		}
		if err := c.cfg.Disks.Evict(ctx, ck); err != nil {
			return api.Checkpoint{}, err
		}
		ck.DiskPath = ""
	}
	usage, err := c.cfg.Disks.Usage(ctx)
	if err != nil {
		return api.Checkpoint{}, err
	}
	return c.checkpointView(sb, ck, &usage), nil
}

// offsiteStatus is checkpoint ck's off-site state for its API view.
func (c *Catalog) offsiteStatus(ck metadata.Checkpoint) (string, *api.OffsiteDetail) {
	svc := c.offsiteOf(ck.AccountID)
	if svc == nil {
		return api.OffsiteOff, nil
	}
	return svc.Status(ck)
}

// localGone gives an error about a checkpoint without its local copy the
// code K (CodeLocalGone); other errors keep theirs.
func localGone(err error, format string, args ...any) error {
	if errors.Is(err, disks.ErrLocalGone) {
		return errdefs.Wrap(api.CodeLocalGone, err, format, args...)
	}
	return err
}
