package metadata

import (
	"errors"
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"time"
)

// Checkpoint triggers: why a checkpoint was taken.
const (
	TriggerManual   = "manual"   // asked for by the user; the only trigger with v-ids
	TriggerInterval = "interval" // the sandbox's automatic interval
	TriggerStop     = "stop"
	TriggerRestart  = "restart"
	TriggerFork     = "fork"
	TriggerDelete   = "delete"
	TriggerRestore  = "restore" // before an in-place restore or rollback: its undo
)

// Checkpoint consistencies.
const (
	ConsistencyFrozen = "frozen" // file system quiesced and sandbox paused
	ConsistencyCrash  = "crash"  // taken without a completed quiesce
)

// Checkpoint is a saved state of one sandbox's disk (and memory).
// Immutable once created, except for its size fields, its name (snapshot
// name), its off-site manifest and where its disk lives.
type Checkpoint struct {
	// ID is the account-wide id: random 16 hex chars, assigned by the
	// caller. Unique across all accounts. cairnd names the checkpoint's
	// disk and memory image after it, but where they are is what DiskPath
	// and MemoryPath say.
	ID        string
	AccountID int64
	// SandboxID is the sandbox it was taken of. Not a reference the store
	// keeps: checkpoints outlive their sandbox.
	SandboxID string
	// SandboxName is the sandbox's name when the checkpoint was taken,
	// kept for listing after the sandbox is deleted.
	SandboxName string
	// Seq is the per-sandbox id: "v0", "v1"… for manual checkpoints,
	// assigned by the store (see CreateCheckpoint); "auto-20261129T091500Z"
	// for automatic ones, given by the caller. Unique in the sandbox.
	Seq string
	// Name is the snapshot name, unique in the account; "" = unnamed.
	Name          string
	Trigger       string // one of the Trigger constants
	Consistency   string // one of the Consistency constants
	Comment       string
	Label         string
	HasMemory     bool
	Image         string // the image the sandbox was made from (to restore as new)
	SizeExclusive int64  // bytes only this checkpoint holds (what deleting it frees)
	SizeTotal     int64  // bytes it refers to in all
	// RootGeneration is the btrfs generation of the sandbox's root
	// subvolume right after the checkpoint was taken: a root still at that
	// generation has not changed since. 0 means unknown (checkpoints stored
	// before schema version 3): treat the disk as changed. Kept as a signed
	// 64-bit integer, so at most math.MaxInt64 (Validate checks).
	RootGeneration uint64
	// OffsiteManifest names the checkpoint's manifest in the account's
	// off-site repository once an upload committed it in at least one
	// location; "" until then. Which locations hold it is the
	// repository's to say. Changed by SetCheckpointOffsite.
	OffsiteManifest string
	// OffsiteUnstorable says why the off-site repository cannot store the
	// checkpoint's tree, a reason no retry changes ("" when it can): the
	// upload queue skips it. Changed by SetCheckpointUnstorable.
	OffsiteUnstorable string
	// ImportedAt is when ImportCheckpoint stored it (read back from
	// off-site: a host that took it is gone); zero for a checkpoint taken
	// here. Retention never deletes an imported checkpoint.
	ImportedAt time.Time
	// DiskPath is where the checkpoint's disk (a read-only subvolume)
	// lives, relative to the pool's root ("checkpoints/<id>"); "" when it
	// has no local copy (a restore then reads it off-site). Changed by
	// SetCheckpointDisk. No two checkpoints name the same path, and a path
	// on DiskDeletes is named by no checkpoint (see the Store).
	DiskPath string
	// MemoryPath is where its memory image lives, relative to the pool's
	// root ("memory/<id>"); "" for none. Only a checkpoint with HasMemory
	// has one. Unique like DiskPath.
	MemoryPath string
	// HostID is the host whose pool holds DiskPath and MemoryPath (Host.ID);
	// "" for a checkpoint taken before hosts existed, or imported with no
	// local copy. Set at create.
	HostID string
	// FromInside is true for a checkpoint asked for by a process inside
	// the sandbox (through its management socket); set at create, cleared
	// when the operator keeps it (KeepCheckpoint).
	FromInside bool
	CreatedAt  time.Time
}

// ValidatePoolPath checks that p can name something inside the pool: a
// relative path in clean form (path.Clean leaves it as it is), not the
// pool's root itself ("."), not leading out of it (".." or "../…"), with
// no NUL byte. DiskPath, MemoryPath and DiskDelete.Path pass it (when not
// ""), so that no row can make cairnd touch a file outside the pool. The
// empty path is invalid here: callers that allow "" for none test it
// first.
func ValidatePoolPath(p string) error {
	switch {
	case p == "":
		return errors.New("empty pool path")
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("pool path %q contains a NUL byte", p)
	case path.IsAbs(p):
		return fmt.Errorf("pool path %q is absolute, want one relative to the pool's root", p)
	case path.Clean(p) != p:
		return fmt.Errorf("pool path %q is not clean (want %q)", p, path.Clean(p))
	case p == ".":
		return errors.New(`pool path "." is the pool's root itself`)
	case p == ".." || strings.HasPrefix(p, "../"):
		return fmt.Errorf("pool path %q leads out of the pool", p)
	}
	return nil
}

// ManualSeq returns the per-sandbox id of the n-th manual checkpoint of a
// sandbox, counting from 0: "v0", "v1"… Stores use it to name what they
// assign.
func ManualSeq(n int64) string { return "v" + strconv.FormatInt(n, 10) }

// isManualSeq reports whether seq has the form of a store-assigned id:
// "v" and decimal digits.
func isManualSeq(seq string) bool {
	digits, ok := strings.CutPrefix(seq, "v")
	if !ok || digits == "" {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Validate checks a checkpoint given to CreateCheckpoint for what the store
// itself relies on: an id, an account, a sandbox id and name, a known
// trigger and consistency, non-negative sizes, a RootGeneration that fits in
// an int64 (what SQL engines keep), a Seq that is either
// empty (the store assigns the next v-id) or not of the v<N> form, which
// only the store assigns, and a DiskPath and MemoryPath that are each ""
// or pass ValidatePoolPath, are not the same path, and a MemoryPath only
// on a checkpoint with HasMemory. It does not judge the syntax of names or
// of automatic ids, nor whether a path is under the directory cairnd puts
// disks in.
func (ck Checkpoint) Validate() error {
	switch {
	case ck.ID == "":
		return errors.New("invalid checkpoint: empty id")
	case ck.AccountID == 0:
		return fmt.Errorf("invalid checkpoint %s: no account", ck.ID)
	case ck.SandboxID == "":
		return fmt.Errorf("invalid checkpoint %s: no sandbox id", ck.ID)
	case ck.SandboxName == "":
		return fmt.Errorf("invalid checkpoint %s: no sandbox name", ck.ID)
	case isManualSeq(ck.Seq):
		return fmt.Errorf("invalid checkpoint %s: seq %q: v-ids are assigned by the store, leave Seq empty", ck.ID, ck.Seq)
	case !validTrigger(ck.Trigger):
		return fmt.Errorf("invalid checkpoint %s: unknown trigger %q", ck.ID, ck.Trigger)
	case ck.Consistency != ConsistencyFrozen && ck.Consistency != ConsistencyCrash:
		return fmt.Errorf("invalid checkpoint %s: unknown consistency %q", ck.ID, ck.Consistency)
	case ck.SizeExclusive < 0 || ck.SizeTotal < 0:
		return fmt.Errorf("invalid checkpoint %s: negative size (exclusive %d, total %d)", ck.ID, ck.SizeExclusive, ck.SizeTotal)
	case ck.RootGeneration > math.MaxInt64:
		return fmt.Errorf("invalid checkpoint %s: root generation %d is past %d", ck.ID, ck.RootGeneration, int64(math.MaxInt64))
	case ck.MemoryPath != "" && !ck.HasMemory:
		return fmt.Errorf("invalid checkpoint %s: memory path %q on a checkpoint without memory", ck.ID, ck.MemoryPath)
	case ck.DiskPath != "" && ck.DiskPath == ck.MemoryPath:
		return fmt.Errorf("invalid checkpoint %s: disk and memory image at the same path %q", ck.ID, ck.DiskPath)
	}
	for _, p := range []struct{ what, path string }{{"disk", ck.DiskPath}, {"memory", ck.MemoryPath}} {
		if p.path == "" {
			continue
		}
		if err := ValidatePoolPath(p.path); err != nil {
			return fmt.Errorf("invalid checkpoint %s: %s path: %w", ck.ID, p.what, err)
		}
	}
	return nil
}

// ValidateImport checks a checkpoint given to ImportCheckpoint: as
// Validate, except that its Seq may be a v-id, and it must name its
// off-site manifest and no local disk or memory image.
func (ck Checkpoint) ValidateImport() error {
	v := ck
	if isManualSeq(v.Seq) {
		v.Seq = ""
	}
	switch {
	case ck.Seq == "":
		return fmt.Errorf("invalid imported checkpoint %s: no seq", ck.ID)
	case ck.OffsiteManifest == "":
		return fmt.Errorf("invalid imported checkpoint %s: no off-site manifest", ck.ID)
	case ck.DiskPath != "" || ck.MemoryPath != "":
		return fmt.Errorf("invalid imported checkpoint %s: it has no local disk or memory image here", ck.ID)
	}
	return v.Validate()
}

// ManualSeqNumber returns N of a store-assigned id v<N>; ok is false for
// any other id.
func ManualSeqNumber(seq string) (n int64, ok bool) {
	if !isManualSeq(seq) {
		return 0, false
	}
	n, err := strconv.ParseInt(seq[1:], 10, 64)
	return n, err == nil
}

func validTrigger(t string) bool {
	switch t {
	case TriggerManual, TriggerInterval, TriggerStop, TriggerRestart, TriggerFork, TriggerDelete, TriggerRestore:
		return true
	}
	return false
}
