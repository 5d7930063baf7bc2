package offsite

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/repo"
)

// Status returns checkpoint ck's off-site state as checkpoint list and
// info show it ("uploaded ×2", "uploaded ×1", "uploading", "pending",
// "failed", "unstorable", or "off") and in full.
func (s *Service) Status(ck metadata.Checkpoint) (string, *api.OffsiteDetail) {
	if s.cfg.Disabled {
		return api.OffsiteOff, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &api.OffsiteDetail{Manifest: ck.OffsiteManifest}
	// A memory checkpoint whose manifest lacks the memory image it has
	// here is not off-site yet: it waits for its upload as a new one does.
	if lacks := s.lacksMemoryLocked(ck); ck.OffsiteManifest == "" || lacks {
		state := api.OffsitePending
		switch f := s.ckFail[ck.ID]; {
		case s.upload != nil && s.upload.ck == ck.ID:
			state = api.OffsiteUploading
			p := s.upload.prog
			d.Progress = &p
		case f != nil && f.unstorable:
			state, d.Error = api.OffsiteUnstorable, errText(f.err)
		case ck.OffsiteUnstorable != "":
			state, d.Error = api.OffsiteUnstorable, ck.OffsiteUnstorable
		case f != nil:
			state, d.Error = api.OffsiteFailed, errText(f.err)
		case s.repo == nil && errors.Is(s.repoErr, errWrongKey):
			state, d.Error = api.OffsiteFailed, s.repoErr.Error()
		case s.repo == nil && s.repoErr != nil:
			d.Error = "waiting: " + s.repoErr.Error()
		case lacks:
			d.Error = "waiting: its disk is off-site, its memory image not yet (uploaded before memory images went off-site)"
		}
		for _, name := range s.Locations() {
			loc := api.OffsiteLocation{Name: name, State: state}
			if e := s.locErr[name]; e != nil && state != api.OffsiteUploading {
				loc.Error = errText(e)
			}
			d.Locations = append(d.Locations, loc)
		}
		return state, d
	}
	holders := s.holders[ck.OffsiteManifest]
	if s.repo == nil && s.repoErr != nil {
		d.Error = "locations not readable now: " + s.repoErr.Error()
	}
	for _, name := range s.Locations() {
		loc := api.OffsiteLocation{Name: name, State: api.OffsitePending}
		switch {
		case slices.Contains(holders, name):
			loc.State = api.OffsiteUploaded
		case s.locErr[name] != nil:
			// Failed until a repair of it succeeds: a retry that runs is
			// no reason to show it uploading.
			loc.State, loc.Error = api.OffsiteFailed, errText(s.locErr[name])
		case s.repairing == name:
			loc.State = api.OffsiteUploading
		}
		d.Locations = append(d.Locations, loc)
	}
	if s.repo == nil {
		return api.OffsiteUploaded, d
	}
	return fmt.Sprintf("%s ×%d", api.OffsiteUploaded, len(holders)), d
}

// Complete reports whether every location holds checkpoint ck: its disk,
// and its memory image if it has one here.
func (s *Service) Complete(ck metadata.Checkpoint) bool {
	if s.cfg.Disabled || ck.OffsiteManifest == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if lacks, known := s.memoryStateLocked(ck); lacks || !known {
		return false
	}
	return s.repo != nil && len(s.holders[ck.OffsiteManifest]) == len(s.cfg.Locations)
}

// opened returns the repository, trying to open it now if it is not,
// or an R01 error saying why there is none.
func (s *Service) opened(ctx context.Context) (*repo.Repository, error) {
	if s.cfg.Disabled {
		return nil, errdefs.New(api.CodeOffsiteUnavailable, "off-site copies are disabled in cairnd's config")
	}
	s.mu.Lock()
	s.openRetry = backoff{} // a user is asking: try now
	s.mu.Unlock()
	if r := s.ensureRepo(ctx); r != nil {
		return r, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return nil, errdefs.New(api.CodeOffsiteUnavailable, "the off-site repository cannot be opened: %v", s.repoErr)
}

// Restore rebuilds checkpoint ck's disk from the repository in dir (empty
// or missing), verifying every chunk. progress, if not nil, is called as
// the restore goes.
func (s *Service) Restore(ctx context.Context, ck metadata.Checkpoint, dir string, progress func(api.TransferProgress)) error {
	return s.restoreTree(ctx, ck, dir, false, progress)
}

// RestoreMemory rebuilds checkpoint ck's memory image from the repository
// in dir (empty or missing), byte for byte, verifying every chunk; K04
// when its manifest holds none (uploaded before memory images went
// off-site: its disk restores alone). progress as for Restore.
func (s *Service) RestoreMemory(ctx context.Context, ck metadata.Checkpoint, dir string, progress func(api.TransferProgress)) error {
	return s.restoreTree(ctx, ck, dir, true, progress)
}

func (s *Service) restoreTree(ctx context.Context, ck metadata.Checkpoint, dir string, memory bool, progress func(api.TransferProgress)) error {
	r, err := s.opened(ctx)
	if err != nil {
		return err
	}
	ref := repo.ManifestRef{ID: ck.OffsiteManifest}
	if ck.OffsiteManifest == "" || len(r.Holders(ref)) == 0 {
		state, _ := s.Status(ck)
		return errdefs.New(api.CodeNotOffsite, "checkpoint %s/%s is not off-site (state %s)", ck.SandboxName, ck.Seq, state)
	}
	what := "restore"
	if memory {
		what = "restore of the memory image"
	}
	start := s.now()
	var last time.Time
	err = r.Restore(ctx, ref, dir, repo.RestoreOptions{Memory: memory, Progress: func(st repo.RestoreStats) {
		now := s.now()
		if progress == nil || now.Sub(last) < time.Second && st.BytesWritten < st.BytesTotal {
			return
		}
		last = now
		p := api.TransferProgress{BytesDone: st.BytesWritten, BytesTotal: st.BytesTotal, Files: st.Files, StartedAt: start}
		if d := now.Sub(start).Seconds(); d > 0 {
			p.BytesPerSec = float64(st.BytesWritten) / d
		}
		progress(p)
	}})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, repo.ErrNoMemory) {
			return errdefs.New(api.CodeMemoryImageBad, "the off-site copy of checkpoint %s/%s holds no memory image (it was uploaded before memory images went off-site); restore its disk alone with --disk-only",
				ck.SandboxName, ck.Seq)
		}
		if errors.Is(err, repo.ErrUnreachable) {
			// Not damage: a location failed to answer. Later may work.
			return errdefs.New(api.CodeOffsiteUnavailable, "%s of checkpoint %s/%s from off-site failed: the locations could not be read now (try again): %s",
				what, ck.SandboxName, ck.Seq, errText(err))
		}
		return errdefs.New(api.CodeOffsiteFailed, "%s of checkpoint %s/%s from off-site failed: %v", what, ck.SandboxName, ck.Seq, err)
	}
	return nil
}

// RestoreWithProgress is Restore reporting, about once a second and at
// the end, the bytes written of those to write (phase fetch) with a line
// for people.
func (s *Service) RestoreWithProgress(ctx context.Context, ck metadata.Checkpoint, dir string, progress func(p api.Progress, line string)) error {
	return s.Restore(ctx, ck, dir, fetchLines(progress, "Fetched"))
}

// RestoreMemoryWithProgress is RestoreMemory reporting as
// RestoreWithProgress does.
func (s *Service) RestoreMemoryWithProgress(ctx context.Context, ck metadata.Checkpoint, dir string, progress func(p api.Progress, line string)) error {
	return s.RestoreMemory(ctx, ck, dir, fetchLines(progress, "Fetched memory image:"))
}

// fetchLines turns transfer progress into fetch progress with a line for
// people beginning with what; nil for nil.
func fetchLines(progress func(p api.Progress, line string), what string) func(api.TransferProgress) {
	if progress == nil {
		return nil
	}
	return func(t api.TransferProgress) {
		progress(api.Progress{Phase: api.PhaseFetch, Done: t.BytesDone, Total: t.BytesTotal, Unit: api.UnitBytes, Rate: t.BytesPerSec},
			fmt.Sprintf("%s %s of %s (%s/s)", what, formatBytes(t.BytesDone), formatBytes(t.BytesTotal), formatBytes(int64(t.BytesPerSec))))
	}
}

// formatBytes renders n in binary units for progress lines: "512 B",
// "42.0 MiB".
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for v := n / unit; v >= unit; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// Verify reads back and authenticates everything in the named location,
// or in both when location is "", and unless noRepair copies what is
// missing or damaged from the other. progress gets a line per step.
func (s *Service) Verify(ctx context.Context, location string, noRepair bool, progress func(string, ...any)) ([]api.LocationReport, error) {
	return s.verify(ctx, location, noRepair, func(_ api.Progress, line string, summary bool) {
		if !summary {
			progress("%s", line)
		}
	})
}

// VerifyWithProgress is Verify reporting, at each step, a line for people
// and the state of every location verified (phase verify, or repair while
// one is repaired; objects checked, per location in Locations). Besides
// the lines Verify gives, it reports what each location's verify and
// repair found.
func (s *Service) VerifyWithProgress(ctx context.Context, location string, noRepair bool, progress func(p api.Progress, line string)) ([]api.LocationReport, error) {
	return s.verify(ctx, location, noRepair, func(p api.Progress, line string, _ bool) { progress(p, line) })
}

// verify is Verify and VerifyWithProgress; progress is told which lines
// are summaries, which Verify does not give.
func (s *Service) verify(ctx context.Context, location string, noRepair bool, progress func(p api.Progress, line string, summary bool)) ([]api.LocationReport, error) {
	names := s.Locations()
	if location != "" {
		if !slices.Contains(names, location) {
			return nil, errdefs.New(api.CodeNoLocation, "no off-site location %q (the account has %v)", location, names)
		}
		names = []string{location}
	}
	r, err := s.opened(ctx)
	if err != nil {
		return nil, err
	}
	if s.cluster != nil && !noRepair {
		// A repair writes: as the account's one writer, across hosts.
		release, err := s.cluster.AccountWriter(ctx, s.account.ID)
		if err != nil {
			return nil, errdefs.New(api.CodeOffsiteUnavailable, "wait for the account's repository writer: %v", err)
		}
		defer release()
	}
	if err := r.Reload(ctx); err != nil {
		return nil, errdefs.New(api.CodeOffsiteUnavailable, "read the off-site repository: %v", err)
	}
	locs := make([]api.LocationProgress, len(names))
	for i, name := range names {
		locs[i] = api.LocationProgress{Name: name, State: api.LocationPending}
	}
	var objects int64 // checked in the locations done
	report := func(phase, line string, summary bool) {
		progress(api.Progress{Phase: phase, Done: objects, Unit: api.UnitObjects, Locations: slices.Clone(locs)}, line, summary)
	}
	var out []api.LocationReport
	for i, name := range names {
		loc := &locs[i]
		loc.State = api.LocationRunning
		report(api.PhaseVerify, fmt.Sprintf("Verifying location %s", name), false)
		lr := api.LocationReport{Name: name}
		rep, err := r.Verify(ctx, name)
		if err != nil {
			lr.Error = err.Error()
			out = append(out, lr)
			loc.State, loc.Error = api.LocationUnavailable, lr.Error
			report(api.PhaseVerify, fmt.Sprintf("Location %s could not be verified: %v", name, err), true)
			continue
		}
		lr.Objects, lr.Bytes, lr.Problems = rep.Objects, rep.Bytes, rep.Problems
		lr.OK = rep.OK()
		loc.Done = int64(rep.Objects)
		objects += loc.Done
		if rep.OK() {
			loc.State = api.LocationDone
		} else {
			loc.State, loc.Error = api.LocationFailed, fmt.Sprintf("%d problems", len(rep.Problems))
		}
		report(api.PhaseVerify, fmt.Sprintf("Location %s: %d objects, %d problems", name, rep.Objects, len(rep.Problems)), true)
		if !rep.OK() && !noRepair {
			loc.State = api.LocationRunning
			report(api.PhaseRepair, fmt.Sprintf("Repairing location %s from the other (%d problems)", name, len(rep.Problems)), false)
			fixed, err := r.Repair(ctx, name)
			if fixed != nil {
				lr.Repaired = fixed.Repaired
			}
			s.refreshHolders(r)
			if err != nil {
				lr.Error = "repair: " + err.Error()
				loc.State, loc.Error = api.LocationFailed, lr.Error
			} else {
				lr.OK = true
				loc.State, loc.Error = api.LocationDone, ""
				s.mu.Lock()
				delete(s.locErr, name)
				delete(s.locRetry, name)
				s.mu.Unlock()
			}
			report(api.PhaseRepair, fmt.Sprintf("Location %s: %d objects repaired", name, len(lr.Repaired)), true)
		}
		out = append(out, lr)
	}
	if ctx.Err() != nil {
		return out, ctx.Err()
	}
	return out, nil
}
