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
	"github.com/cairn-sandbox/cairn/internal/checkpoint"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/operation"
	"github.com/cairn-sandbox/cairn/internal/revert"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// checkpointOpts describes a checkpoint to take.
type checkpointOpts struct {
	Trigger string
	Comment string
	Label   string
	Name    string // snapshot name; "" for none
	Memory  bool   // save processes and memory too (the sandbox must run)
	// StopAfter ends the sandbox once saved (a saved session).
	StopAfter bool
}

// CreateCheckpoint starts an operation that checkpoints the sandbox called
// name. Concurrent checkpoints of one sandbox queue behind each other.
func (m *Manager) CreateCheckpoint(ctx context.Context, account, name string, req api.CreateCheckpointRequest) (*operation.Op, error) {
	acct, sb, err := m.lookup(ctx, account, name)
	if err != nil {
		return nil, err
	}
	if req.Name != "" {
		if err := validateSnapshotName(req.Name); err != nil {
			return nil, err
		}
		if _, err := m.cfg.Store.CheckpointByName(ctx, acct.ID, req.Name); err == nil {
			return nil, errdefs.New(api.CodeSnapshotNameTaken, "a snapshot named %q already exists", req.Name)
		}
	}
	return m.cfg.Ops.Start("checkpoint.create", "sandbox/"+name, func(ctx context.Context, op *operation.Op) (any, error) {
		op.Progress("Creating checkpoint of %s…", name)
		defer m.lockDisk(sb.ID)()
		// Re-read: a lifecycle operation may have run while we queued.
		cur, err := m.cfg.Store.SandboxByID(ctx, sb.ID)
		if err != nil {
			if errors.Is(err, metadata.ErrNotFound) {
				return nil, errdefs.New(api.CodeNoSandbox, "sandbox %s was deleted", name)
			}
			return nil, err
		}
		ck, res, err := m.checkpoint(ctx, cur, checkpointOpts{Trigger: api.TriggerManual, Comment: req.Comment, Label: req.Label, Name: req.Name, Memory: req.Memory}, op)
		if err != nil {
			return nil, err
		}
		op.Progress("Checkpoint %s created", ck.Seq)
		// Sizes are left out of this answer: measuring them commits the
		// pool, which would slow every checkpoint down. `checkpoint info`
		// has them.
		out := m.checkpointView(cur, ck, nil)
		out.PausedMS = float64(res.Paused.Microseconds()) / 1000
		return out, nil
	}), nil
}

// checkpoint takes a checkpoint of sb and records it. The caller holds
// sb's disk lock.
func (m *Manager) checkpoint(ctx context.Context, sb metadata.Sandbox, opts checkpointOpts, op *operation.Op) (metadata.Checkpoint, checkpoint.Result, error) {
	undo := revert.New()
	defer undo.Fail()

	if err := m.checkDiskLimit(ctx); err != nil {
		return metadata.Checkpoint{}, checkpoint.Result{}, err
	}
	id := newID()
	dest := m.cfg.Pool.CheckpointPath(id)
	m.mu.Lock()
	inst := m.live[sb.ID]
	m.mu.Unlock()
	req := checkpoint.Request{
		Root:         m.cfg.Pool.SandboxPath(sb.ID),
		Dest:         dest,
		Running:      inst != nil,
		Runtime:      m.cfg.Runtime,
		Pool:         m.cfg.Pool,
		Checkpointer: m.cfg.Runtime,
		Memory:       opts.Memory,
		StopAfter:    opts.StopAfter,
		Progress:     func(s string) { op.Progress("%s", s) },
	}
	if inst != nil {
		req.Agent, req.Container = inst.agent, inst.container
	}
	if opts.Memory {
		if inst == nil {
			return metadata.Checkpoint{}, checkpoint.Result{}, errdefs.New(api.CodeNotRunning, "sandbox %s is not running: a memory checkpoint needs running processes", sb.Name)
		}
		req.MemoryDir = m.cfg.Pool.MemoryPath(id)
		if err := m.cfg.Pool.Create(ctx, req.MemoryDir); err != nil {
			return metadata.Checkpoint{}, checkpoint.Result{}, err
		}
		undo.Add(func() { logErr("undo: delete memory image", m.cfg.Pool.Delete(context.Background(), req.MemoryDir)) })
	}
	res, err := checkpoint.Take(ctx, req)
	if err != nil {
		m.cfg.Pool.Delete(context.WithoutCancel(ctx), dest)
		return metadata.Checkpoint{}, res, errdefs.Wrap(api.CodeCheckpointFailed, err, "checkpoint of %s", sb.Name)
	}
	undo.Add(func() { logErr("undo: delete checkpoint snapshot", m.cfg.Pool.Delete(context.Background(), dest)) })
	// The snapshot carries the root's change marker of the instant it was
	// taken: the disk changed since iff the root's marker differs.
	marker, err := volume.ChangeMarker(dest)
	if err != nil {
		return metadata.Checkpoint{}, res, err
	}
	row := metadata.Checkpoint{
		ID: id, AccountID: sb.AccountID, SandboxID: sb.ID, SandboxName: sb.Name,
		Name: opts.Name, Trigger: opts.Trigger, Consistency: res.Consistency,
		Comment: opts.Comment, Label: opts.Label, Image: sb.Image, RootGeneration: marker,
		HasMemory: opts.Memory,
	}
	var ck metadata.Checkpoint
	if opts.Trigger == api.TriggerManual {
		ck, err = m.cfg.Store.CreateCheckpoint(ctx, row) // the store numbers it vN
	} else {
		ck, err = m.createAuto(ctx, row)
	}
	if err != nil {
		if errors.Is(err, metadata.ErrConflict) {
			return ck, res, errdefs.Wrap(api.CodeSnapshotNameTaken, err, "a snapshot named %q already exists", opts.Name)
		}
		return ck, res, err
	}
	undo.Success()
	m.refreshBrowseSoon(sb)
	m.offsiteChanged()
	slog.Info("checkpoint created", "sandbox", sb.Name, "id", ck.Seq, "global_id", ck.ID, "trigger", ck.Trigger,
		"consistency", ck.Consistency, "memory", ck.HasMemory, "paused", res.Paused, "quiesce", res.Quiesce, "memory_save", res.MemorySave)
	return ck, res, nil
}

// autoCheckpoint takes an automatic checkpoint with trigger as part of a
// lifecycle operation. Past the disk limit it is skipped, noted for
// `cairn status` and reported on op; other failures are reported too. The
// caller holds sb's disk lock.
func (m *Manager) autoCheckpoint(ctx context.Context, sb metadata.Sandbox, trigger string, op *operation.Op) error {
	ck, _, err := m.checkpoint(ctx, sb, checkpointOpts{Trigger: trigger}, op)
	m.noteAuto(sb.ID, trigger, err)
	if err != nil {
		op.Infof("Automatic checkpoint (%s) skipped: %v", trigger, err)
		slog.Warn("automatic checkpoint skipped", "sandbox", sb.Name, "trigger", trigger, "err", err)
		return err
	}
	op.Progress("Automatic checkpoint %s taken (%s)", ck.Seq, trigger)
	return nil
}

// noteAuto remembers why the last automatic checkpoint of a sandbox was
// skipped, for `cairn status`; a success clears it.
func (m *Manager) noteAuto(id, trigger string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil {
		delete(m.autoSkipped, id)
		return
	}
	m.autoSkipped[id] = fmt.Sprintf("%s checkpoint skipped at %s: error %s: %v", trigger, m.cfg.Now().UTC().Format(time.RFC3339), errdefs.CodeOf(err), err)
}

// createAuto records an automatic checkpoint under the id
// auto-<UTC yyyymmddThhmmssZ>, with -2, -3… when that second is taken.
func (m *Manager) createAuto(ctx context.Context, row metadata.Checkpoint) (metadata.Checkpoint, error) {
	base := "auto-" + m.cfg.Now().UTC().Format("20060102T150405Z")
	for i := 1; ; i++ {
		row.Seq = base
		if i > 1 {
			row.Seq = fmt.Sprintf("%s-%d", base, i)
		}
		ck, err := m.cfg.Store.CreateCheckpoint(ctx, row)
		if !errors.Is(err, metadata.ErrConflict) || i >= 100 {
			return ck, err
		}
		if row.Name != "" {
			if _, nerr := m.cfg.Store.CheckpointByName(ctx, row.AccountID, row.Name); nerr == nil {
				return ck, err // the name, not the id, is taken
			}
		}
	}
}

// checkDiskLimit fails with L04 when the account's content has reached the
// disk limit. Nothing stored is touched.
func (m *Manager) checkDiskLimit(ctx context.Context) error {
	if m.cfg.DiskLimit <= 0 {
		return nil
	}
	used, err := m.cfg.Pool.ContentUsage(ctx)
	if err != nil {
		return err
	}
	if used >= m.cfg.DiskLimit {
		return errdefs.New(api.CodeDiskLimit, "the account's disk limit is reached (%d of %d bytes used by sandboxes and checkpoints); delete checkpoints or sandboxes to make room",
			used, m.cfg.DiskLimit)
	}
	return nil
}

// validateSnapshotName checks a snapshot name (same rules as sandbox names).
func validateSnapshotName(name string) error {
	if err := ValidateName(name); err != nil {
		return errdefs.New(api.CodeInvalidName, "invalid snapshot name %q: use 1-63 lower-case letters, digits and dashes, starting with a letter or digit", name)
	}
	return nil
}

// findCheckpoint returns sandbox sb's checkpoint with the per-sandbox id
// (v3, auto-…) or the account-wide id ref.
func (m *Manager) findCheckpoint(ctx context.Context, sb metadata.Sandbox, ref string) (metadata.Checkpoint, error) {
	ck, err := m.cfg.Store.CheckpointBySeq(ctx, sb.ID, ref)
	if errors.Is(err, metadata.ErrNotFound) {
		ck, err = m.cfg.Store.CheckpointByID(ctx, ref)
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
func (m *Manager) resolveSnapshot(ctx context.Context, acct metadata.Account, ref string) (metadata.Checkpoint, error) {
	notFound := errdefs.New(api.CodeNoCheckpoint, "no checkpoint or snapshot %q in your account", ref)
	if sbName, seq, ok := strings.Cut(ref, "/"); ok {
		sb, err := m.cfg.Store.SandboxByName(ctx, acct.ID, sbName)
		if errors.Is(err, metadata.ErrNotFound) {
			return metadata.Checkpoint{}, notFound
		} else if err != nil {
			return metadata.Checkpoint{}, err
		}
		ck, err := m.cfg.Store.CheckpointBySeq(ctx, sb.ID, seq)
		if errors.Is(err, metadata.ErrNotFound) {
			return ck, notFound
		}
		return ck, err
	}
	ck, err := m.cfg.Store.CheckpointByName(ctx, acct.ID, ref)
	if errors.Is(err, metadata.ErrNotFound) {
		ck, err = m.cfg.Store.CheckpointByID(ctx, ref)
		if err == nil && ck.AccountID != acct.ID {
			err = metadata.ErrNotFound
		}
	}
	if errors.Is(err, metadata.ErrNotFound) {
		return ck, notFound
	}
	return ck, err
}

// checkpointView turns a stored checkpoint into its API form; usage may be
// nil (sizes then stay zero).
func (m *Manager) checkpointView(sb metadata.Sandbox, ck metadata.Checkpoint, usage map[string]volume.Usage) api.Checkpoint {
	out := api.Checkpoint{
		ID: ck.Seq, GlobalID: ck.ID, Sandbox: ck.SandboxName, Name: ck.Name, Trigger: ck.Trigger,
		Consistency: ck.Consistency, Comment: ck.Comment, Label: ck.Label, HasMemory: ck.HasMemory,
		Image: ck.Image, CreatedAt: ck.CreatedAt, Current: sb.CurrentCheckpoint == ck.ID,
	}
	out.Offsite, out.OffsiteDetail = m.offsiteStatus(ck)
	for _, path := range m.ckPaths(ck) {
		if u, ok := usage[m.cfg.Pool.Rel(path)]; ok {
			out.SizeExclusive += u.Exclusive
			out.SizeTotal += u.Referenced
		}
	}
	return out
}

// ckPaths are the subvolumes that may hold checkpoint ck's data: its disk
// (in one of two places) and its memory image.
func (m *Manager) ckPaths(ck metadata.Checkpoint) []string {
	return []string{
		m.cfg.Pool.CheckpointPath(ck.ID),
		filepath.Join(m.browseDir(ck.SandboxID), ck.Seq),
		m.cfg.Pool.MemoryPath(ck.ID),
	}
}

// Checkpoints lists the checkpoints of the sandbox called name, oldest
// first; automatic ones only with includeAuto.
func (m *Manager) Checkpoints(ctx context.Context, account, name string, includeAuto bool) ([]api.Checkpoint, error) {
	acct, sb, err := m.lookup(ctx, account, name)
	if err != nil {
		return nil, err
	}
	rows, err := m.cfg.Store.ListCheckpoints(ctx, acct.ID, metadata.CheckpointFilter{SandboxID: sb.ID, IncludeAuto: includeAuto})
	if err != nil {
		return nil, err
	}
	usage, err := m.cfg.Pool.Usage(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.Checkpoint, 0, len(rows))
	for _, ck := range rows {
		out = append(out, m.checkpointView(sb, ck, usage))
	}
	return out, nil
}

// Checkpoint returns one checkpoint of the sandbox called name.
func (m *Manager) Checkpoint(ctx context.Context, account, name, ref string) (api.Checkpoint, error) {
	_, sb, err := m.lookup(ctx, account, name)
	if err != nil {
		return api.Checkpoint{}, err
	}
	ck, err := m.findCheckpoint(ctx, sb, ref)
	if err != nil {
		return api.Checkpoint{}, err
	}
	usage, err := m.cfg.Pool.Usage(ctx)
	if err != nil {
		return api.Checkpoint{}, err
	}
	return m.checkpointView(sb, ck, usage), nil
}

// DeleteCheckpoint deletes a checkpoint of the sandbox called name and
// frees its space before returning. A sandbox's current checkpoint cannot
// be deleted.
func (m *Manager) DeleteCheckpoint(ctx context.Context, account, name, ref string) error {
	acct, sb, err := m.lookup(ctx, account, name)
	if err != nil {
		return err
	}
	defer m.lockDisk(sb.ID)()
	ck, err := m.findCheckpoint(ctx, sb, ref)
	if err != nil {
		return err
	}
	return m.deleteCheckpoint(ctx, acct, ck)
}

func (m *Manager) deleteCheckpoint(ctx context.Context, acct metadata.Account, ck metadata.Checkpoint) error {
	users, err := m.cfg.Store.ListSandboxes(ctx, acct.ID, metadata.SandboxFilter{})
	if err != nil {
		return err
	}
	for _, u := range users {
		if u.CurrentCheckpoint == ck.ID {
			return errdefs.New(api.CodeCheckpointCurrent,
				"checkpoint %s is the current checkpoint of sandbox %s (its disk was restored or forked from it) and cannot be deleted", ck.Seq, u.Name)
		}
	}
	disk := m.ckPath(ck)
	// The row goes first: a crash after it leaves only an orphan snapshot,
	// which the next start sweeps.
	if err := m.cfg.Store.DeleteCheckpoint(ctx, ck.ID); err != nil {
		return err
	}
	if ck.HasMemory {
		if err := m.cfg.Pool.Delete(ctx, m.cfg.Pool.MemoryPath(ck.ID)); err != nil {
			return err
		}
	}
	m.offsiteForget(ck)
	if ok, _ := volume.IsSubvolume(disk); ok { // its local copy may be gone already
		if err := m.cfg.Pool.Reclaim(ctx, disk); err != nil {
			return err
		}
	}
	m.offsiteChanged() // its manifest goes from the locations too
	// The next newest checkpoint (if any) becomes browsable.
	if sb, err := m.cfg.Store.SandboxByID(ctx, ck.SandboxID); err == nil {
		logErr("refresh /.cairn/checkpoints", m.refreshBrowse(ctx, sb), "sandbox", sb.Name)
	}
	slog.Info("checkpoint deleted", "sandbox", ck.SandboxName, "id", ck.Seq, "global_id", ck.ID)
	return nil
}

// Diff lists what differs between checkpoint from and checkpoint to of the
// sandbox called name, or its current disk when to is "".
func (m *Manager) Diff(ctx context.Context, account, name, from, to string) ([]api.DiffEntry, error) {
	_, sb, err := m.lookup(ctx, account, name)
	if err != nil {
		return nil, err
	}
	if from == "" {
		return nil, errdefs.New(api.CodeInvalidArgument, "diff needs a checkpoint to compare from")
	}
	a, err := m.findCheckpoint(ctx, sb, from)
	if err != nil {
		return nil, err
	}
	defer m.lockDisk(sb.ID)()
	toPath := m.cfg.Pool.SandboxPath(sb.ID)
	if to != "" {
		b, err := m.findCheckpoint(ctx, sb, to)
		if err != nil {
			return nil, err
		}
		toPath = m.ckPath(b)
	}
	changes, err := checkpoint.Diff(ctx, m.ckPath(a), toPath)
	if err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	out := make([]api.DiffEntry, 0, len(changes))
	for _, c := range changes {
		out = append(out, api.DiffEntry{Path: c.Path, Kind: c.Kind, What: c.What, Mode: c.Mode})
	}
	return out, nil
}

// diskUsage returns what a sandbox's root and its checkpoints alone hold.
func (m *Manager) diskUsage(ctx context.Context, sb metadata.Sandbox) (*api.DiskUsage, error) {
	usage, err := m.cfg.Pool.Usage(ctx)
	if err != nil {
		return nil, err
	}
	cks, err := m.cfg.Store.ListCheckpoints(ctx, sb.AccountID, metadata.CheckpointFilter{SandboxID: sb.ID, IncludeAuto: true})
	if err != nil {
		return nil, err
	}
	du := &api.DiskUsage{Sandbox: usage[m.cfg.Pool.Rel(m.cfg.Pool.SandboxPath(sb.ID))].Exclusive, CheckpointCount: len(cks)}
	for _, ck := range cks {
		for _, path := range m.ckPaths(ck) {
			du.Checkpoints += usage[m.cfg.Pool.Rel(path)].Exclusive
		}
	}
	return du, nil
}
