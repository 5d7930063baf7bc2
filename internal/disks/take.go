package disks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/checkpoint"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/revert"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// TakeRequest is one checkpoint to take of a sandbox. The caller holds the
// sandbox's exclusive lease, so nothing else changes its root meanwhile.
type TakeRequest struct {
	Sandbox metadata.Sandbox
	// Container and Agent of the running sandbox; Running false snapshots
	// a stopped sandbox's root as it is.
	Running   bool
	Container string
	Agent     checkpoint.Quiescer
	// SaveAgentKeys writes the agent's keys into a memory image (see
	// checkpoint.Request); needed with Memory.
	SaveAgentKeys func(memoryDir string) error

	Trigger string
	Comment string
	Label   string
	Name    string // snapshot name; "" for none
	Memory  bool   // processes and memory too (needs Running)
	// StopAfter ends the sandbox once its memory is saved (a saved session).
	StopAfter bool
	// FromInside marks a checkpoint a process inside the sandbox asked for.
	FromInside bool
	// Progress reports each phase (api.Phase…) with a line for people.
	Progress func(phase, msg string)
}

// Take takes a checkpoint and records its row, which names its disk and
// memory image. On failure nothing of it is left.
func (d *Disks) Take(ctx context.Context, r TakeRequest) (metadata.Checkpoint, checkpoint.Result, error) {
	undo := revert.New()
	defer undo.Fail()
	sb := r.Sandbox
	if r.Memory && !r.Running {
		return metadata.Checkpoint{}, checkpoint.Result{}, errdefs.New(api.CodeNotRunning, "sandbox %s is not running: a memory checkpoint needs running processes", sb.Name)
	}
	if err := d.CheckLimit(ctx, sb.AccountID); err != nil {
		return metadata.Checkpoint{}, checkpoint.Result{}, err
	}
	id := newID()
	row := metadata.Checkpoint{
		ID: id, AccountID: sb.AccountID, SandboxID: sb.ID, SandboxName: sb.Name,
		Name: r.Name, Trigger: r.Trigger, Comment: r.Comment, Label: r.Label, Image: sb.Image,
		HasMemory: r.Memory, DiskPath: d.cfg.Pool.Rel(d.cfg.Pool.CheckpointPath(id)), FromInside: r.FromInside,
		HostID: d.cfg.HostID,
	}
	dest, _ := d.abs(row.DiskPath)
	progress := r.Progress
	if progress == nil {
		progress = func(string, string) {}
	}
	req := checkpoint.Request{
		Root: d.cfg.Pool.SandboxPath(sb.ID), Dest: dest, Running: r.Running,
		Container: r.Container, Agent: r.Agent, Runtime: d.cfg.Runtime, Pool: d.cfg.Pool,
		Checkpointer: d.cfg.Runtime, Memory: r.Memory, StopAfter: r.StopAfter,
		SaveAgentKeys: r.SaveAgentKeys,
		Progress:      progress,
	}
	if r.Memory {
		row.MemoryPath = d.cfg.Pool.Rel(d.cfg.Pool.MemoryPath(id))
		req.MemoryDir, _ = d.abs(row.MemoryPath)
		if err := d.cfg.Pool.Create(ctx, req.MemoryDir); err != nil {
			return metadata.Checkpoint{}, checkpoint.Result{}, err
		}
		undo.Add(func() { logErr("undo: delete memory image", d.cfg.Pool.Delete(context.Background(), req.MemoryDir)) })
	}
	res, err := checkpoint.Take(ctx, req)
	if err != nil {
		d.cfg.Pool.Delete(context.WithoutCancel(ctx), dest)
		return metadata.Checkpoint{}, res, errdefs.Wrap(api.CodeCheckpointFailed, err, "checkpoint of %s", sb.Name)
	}
	undo.Add(func() { logErr("undo: delete checkpoint snapshot", d.cfg.Pool.Delete(context.Background(), dest)) })
	// The snapshot carries the root's change marker of the instant it was
	// taken: the disk changed since iff the root's marker differs.
	if row.RootGeneration, err = volume.ChangeMarker(dest); err != nil {
		return metadata.Checkpoint{}, res, err
	}
	row.Consistency = res.Consistency
	var ck metadata.Checkpoint
	if r.Trigger == api.TriggerManual {
		ck, err = d.cfg.Store.CreateCheckpoint(ctx, row) // the store numbers it vN
	} else {
		ck, err = d.createAuto(ctx, row)
	}
	if err != nil {
		if errors.Is(err, metadata.ErrConflict) && r.Name != "" {
			if _, nerr := d.cfg.Store.CheckpointByName(ctx, sb.AccountID, r.Name); nerr == nil {
				return ck, res, errdefs.Wrap(api.CodeSnapshotNameTaken, err, "a snapshot named %q already exists", r.Name)
			}
		}
		return ck, res, err
	}
	undo.Success()
	slog.Info("checkpoint created", "sandbox", sb.Name, "id", ck.Seq, "global_id", ck.ID, "trigger", ck.Trigger,
		"consistency", ck.Consistency, "memory", ck.HasMemory, "paused", res.Paused, "quiesce", res.Quiesce, "memory_save", res.MemorySave)
	return ck, res, nil
}

// createAuto records an automatic checkpoint under the id
// auto-<UTC yyyymmddThhmmssZ>, with -2, -3… when that second is taken.
func (d *Disks) createAuto(ctx context.Context, row metadata.Checkpoint) (metadata.Checkpoint, error) {
	base := "auto-" + d.cfg.Now().UTC().Format("20060102T150405Z")
	for i := 1; ; i++ {
		row.Seq = base
		if i > 1 {
			row.Seq = fmt.Sprintf("%s-%d", base, i)
		}
		ck, err := d.cfg.Store.CreateCheckpoint(ctx, row)
		if !errors.Is(err, metadata.ErrConflict) || i >= 100 {
			return ck, err
		}
		if row.Name != "" {
			if _, nerr := d.cfg.Store.CheckpointByName(ctx, row.AccountID, row.Name); nerr == nil {
				return ck, err // the name, not the id, is taken
			}
		}
	}
}
