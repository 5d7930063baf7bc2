package disks

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Browsable returns what sandbox sb sees under /.cairn/checkpoints: its
// BrowseCount newest checkpoints that have a local copy, newest first.
func (d *Disks) Browsable(ctx context.Context, sb metadata.Sandbox) ([]ViewEntry, error) {
	cks, err := d.cfg.Store.ListCheckpoints(ctx, sb.AccountID, metadata.CheckpointFilter{SandboxID: sb.ID, IncludeAuto: true})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(cks, func(i, j int) bool { return cks[i].CreatedAt.After(cks[j].CreatedAt) })
	var out []ViewEntry
	for _, ck := range cks {
		if len(out) == BrowseCount {
			break
		}
		if ck.DiskPath != "" {
			out = append(out, ViewEntry{Name: ck.Seq, Path: ck.DiskPath})
		}
	}
	return out, nil
}

// Publish brings sandbox sb's browse view up to date: its BrowseCount
// newest checkpoints. Call it when the sandbox starts and whenever its
// checkpoints change; the view is replaced whole, so a crash at any point
// leaves either the old list or the new one.
func (d *Disks) Publish(ctx context.Context, sb metadata.Sandbox) error {
	if d.cfg.View == nil {
		return nil
	}
	entries, err := d.Browsable(ctx, sb)
	if err != nil {
		return err
	}
	return d.cfg.View.Publish(sb.ID, entries)
}

// PublishSoon is Publish off the caller's path (a checkpoint's answer does
// not wait for the table's write and fsync): one worker publishes the
// sandboxes asked for, each from the store as it is when its turn comes,
// so the last publish of a sandbox always shows its latest checkpoints.
func (d *Disks) PublishSoon(sb metadata.Sandbox) {
	if d.cfg.View == nil {
		return
	}
	d.viewMu.Lock()
	defer d.viewMu.Unlock()
	if d.pending == nil {
		d.pending = map[string]metadata.Sandbox{}
	}
	d.pending[sb.ID] = sb
	if d.publishing {
		return
	}
	d.publishing = true
	go d.publishPending()
}

func (d *Disks) publishPending() {
	for {
		d.viewMu.Lock()
		var sb metadata.Sandbox
		for _, p := range d.pending {
			sb = p
			break
		}
		if sb.ID == "" {
			d.publishing = false
			d.viewMu.Unlock()
			return
		}
		delete(d.pending, sb.ID)
		d.viewMu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if _, err := d.cfg.Store.SandboxByID(ctx, sb.ID); err == nil { // not deleted meanwhile
			logErr("refresh /.cairn/checkpoints", d.Publish(ctx, sb), "sandbox", sb.Name)
			// Deleted while it was written: its view must not stay.
			if _, err := d.cfg.Store.SandboxByID(ctx, sb.ID); errors.Is(err, metadata.ErrNotFound) {
				logErr("remove the view of a deleted sandbox", d.cfg.View.Unpublish(sb.ID), "sandbox", sb.Name)
			}
		}
		cancel()
	}
}

// Unpublish removes sandbox id's browse view (the sandbox is deleted).
func (d *Disks) Unpublish(id string) error {
	if d.cfg.View == nil {
		return nil
	}
	return d.cfg.View.Unpublish(id)
}
