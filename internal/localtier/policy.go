// Package localtier decides which checkpoints keep their local copy once
// both off-site locations hold them. A checkpoint off-site ×2 keeps its
// local disk while it is among its sandbox's newest (Policy.KeepNewest) or
// younger than Policy.KeepFor; past that its local copy goes, and a
// restore reads it from off-site. When the pool runs low, the oldest
// local copies that off-site holds go first, policy or not. Never a
// checkpoint that is not off-site ×2, never a sandbox's current checkpoint
// or the saved session it resumes from. A memory checkpoint goes like any
// other, disk and memory image (both are off-site: restored from there, its
// processes resume). The decision is a pure
// function of the checkpoints, the sandboxes and the clock (Plan); Tier
// applies it on the scheduler's tick, and Refuse says why a checkpoint's
// copy may not be dropped by hand (cairn checkpoint evict).
package localtier

import (
	"sort"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/offsite"
)

// Policy is how long an account keeps local copies of what off-site
// holds. The zero value is DefaultPolicy.
type Policy struct {
	// KeepNewest is how many of each sandbox's newest checkpoints keep
	// their local copy (default 5; -1 keeps none by this rule).
	KeepNewest int `json:"keep_newest,omitempty"`
	// KeepFor keeps every checkpoint younger than this (default 24h; a
	// negative one keeps none by this rule).
	KeepFor offsite.Duration `json:"keep_for,omitempty"`
}

// DefaultPolicy keeps each sandbox's newest 5 checkpoints and everything
// of the last 24 hours.
var DefaultPolicy = Policy{KeepNewest: 5, KeepFor: offsite.Duration(24 * time.Hour)}

// WithDefaults fills what p leaves at zero from DefaultPolicy.
func (p Policy) WithDefaults() Policy {
	if p.KeepNewest == 0 {
		p.KeepNewest = DefaultPolicy.KeepNewest
	}
	if p.KeepFor == 0 {
		p.KeepFor = DefaultPolicy.KeepFor
	}
	return p
}

// Facts are what the plan of one account is made from.
type Facts struct {
	Checkpoints []metadata.Checkpoint // every checkpoint of the account
	Sandboxes   []metadata.Sandbox    // every sandbox of the account
	// Both reports whether both off-site locations hold the checkpoint.
	Both func(metadata.Checkpoint) bool
	Now  time.Time
}

// Plan returns the checkpoints whose local copy the policy lets go
// (Evict), and those that could go too, oldest first, when the pool runs
// low (IfLow: off-site ×2 and allowed, but kept by the policy).
func Plan(p Policy, f Facts) (evict, ifLow []metadata.Checkpoint) {
	p = p.WithDefaults()
	pinned := pinnedOf(f.Sandboxes)
	bySandbox := map[string][]metadata.Checkpoint{}
	for _, ck := range f.Checkpoints {
		bySandbox[ck.SandboxID] = append(bySandbox[ck.SandboxID], ck)
	}
	for _, cks := range bySandbox {
		sort.SliceStable(cks, func(i, j int) bool { return cks[i].CreatedAt.After(cks[j].CreatedAt) })
		for i, ck := range cks {
			if ck.DiskPath == "" || refusal(ck, pinned, f.Both) != "" {
				continue
			}
			newest := p.KeepNewest > 0 && i < p.KeepNewest
			young := p.KeepFor > 0 && f.Now.Sub(ck.CreatedAt) < time.Duration(p.KeepFor)
			if newest || young {
				ifLow = append(ifLow, ck)
			} else {
				evict = append(evict, ck)
			}
		}
	}
	oldestFirst := func(cks []metadata.Checkpoint) {
		sort.SliceStable(cks, func(i, j int) bool { return cks[i].CreatedAt.Before(cks[j].CreatedAt) })
	}
	oldestFirst(evict)
	oldestFirst(ifLow)
	return evict, ifLow
}

// Why a checkpoint's local copy may not be dropped.
const (
	NotOffsite = "both off-site locations do not hold it yet"
	Current    = "it is a sandbox's current checkpoint (its disk was restored or forked from it)"
	Resumes    = "a stopped sandbox resumes from it"
)

// Refuse says why checkpoint ck's local copy may not be dropped, "" when
// it may; sandboxes are its account's.
func Refuse(ck metadata.Checkpoint, sandboxes []metadata.Sandbox, both func(metadata.Checkpoint) bool) string {
	return refusal(ck, pinnedOf(sandboxes), both)
}

// pinnedOf maps the checkpoints sandboxes stand on to why.
func pinnedOf(sandboxes []metadata.Sandbox) map[string]string {
	pinned := map[string]string{}
	for _, sb := range sandboxes {
		if sb.CurrentCheckpoint != "" {
			pinned[sb.CurrentCheckpoint] = Current
		}
		if sb.ResumeCheckpoint != "" {
			pinned[sb.ResumeCheckpoint] = Resumes
		}
	}
	return pinned
}

func refusal(ck metadata.Checkpoint, pinned map[string]string, both func(metadata.Checkpoint) bool) string {
	switch {
	case pinned[ck.ID] != "":
		return pinned[ck.ID]
	case both == nil || !both(ck):
		return NotOffsite
	}
	return ""
}
