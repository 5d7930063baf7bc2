package disks

import (
	"context"
	"fmt"

	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// Usage is a reading of the pool's quota groups.
type Usage struct {
	pool *volume.Pool
	m    map[string]volume.Usage
}

// Usage reads the pool's quota groups (it commits the pool first).
func (d *Disks) Usage(ctx context.Context) (Usage, error) {
	m, err := d.cfg.Pool.Usage(ctx)
	return Usage{pool: d.cfg.Pool, m: m}, err
}

// Checkpoint returns what checkpoint ck alone holds (what deleting it
// frees) and what it refers to in all, its disk and memory image together.
func (u Usage) Checkpoint(ck metadata.Checkpoint) (exclusive, total int64) {
	for _, rel := range []string{ck.DiskPath, ck.MemoryPath} {
		if rel == "" {
			continue
		}
		g := u.m[rel]
		exclusive += g.Exclusive
		total += g.Referenced
	}
	return exclusive, total
}

// Root returns what sandbox id's root alone holds.
func (u Usage) Root(id string) int64 {
	return u.m[u.pool.Rel(u.pool.SandboxPath(id))].Exclusive
}

// VerifyLocal checks that every checkpoint of cks has its disk where its
// row says and, if it has one, its memory image; it does not read the
// data (btrfs checksums it: btrfs scrub). It returns one line per problem.
func (d *Disks) VerifyLocal(ctx context.Context, cks []metadata.Checkpoint) []string {
	var problems []string
	for _, ck := range cks {
		name := ck.SandboxName + "/" + ck.Seq
		if _, err := d.localDisk(ctx, ck); err != nil {
			switch {
			case ck.OffsiteManifest != "":
				problems = append(problems, fmt.Sprintf("%s: the local disk is gone (restore it from off-site)", name))
			default:
				problems = append(problems, fmt.Sprintf("%s: the local disk is gone (not off-site either)", name))
			}
			continue
		}
		if ck.HasMemory {
			if err := d.CheckMemory(ck); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", name, err))
			}
		}
	}
	return problems
}
