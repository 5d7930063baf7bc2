package disks

import (
	"context"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// An account's disk use is counted by cairnd from the level-0 quota groups
// of its subvolumes, not by a quota group of its own: btrfs cannot keep a
// second level-1 group per account consistent (a snapshot inherited into
// two level-1 groups, or into a group its source lies outside, makes the
// kernel mark every figure inconsistent and stop accounting until a
// rescan; docs/accounts.md has the measurements). The pool group 1/1 stays
// the only higher group, and the kernel goes on enforcing each sandbox's
// --disk and the pool's reserve.
//
// The subvolumes of an account fall into families: a sandbox's root and
// its checkpoints, joined by forks and restores to the sandbox and the
// checkpoint they were made from. Only members of one family share data
// (besides images, which are the host's and not counted). A family takes
// at least its largest member's own data (its referenced bytes less its
// image's) plus what each other member alone holds (its exclusive
// bytes), and that is the figure: exact for one sandbox with a line of
// checkpoints and for unrelated sandboxes; below the truth only when data
// is shared by some members and none of them is the largest. Memory
// images share nothing and count whole.

// useMember is one subvolume of an account, as accountUse reads it.
type useMember struct {
	Family string // a sandbox id of the family (any: families are joined)
	Path   string // relative to the pool's root
	Image  string // pool-relative path of its image's subvolume; "" when none
	Memory bool   // a memory image: counted whole, in no family
}

// accountUse is the bytes the members take, by the rule above, from the
// pool's usage by path. links joins families: each pair names two sandbox
// ids whose subvolumes may share data. A member whose subvolume is missing
// from usage (deleted meanwhile) counts nothing.
func accountUse(usage map[string]volume.Usage, members []useMember, links [][2]string) int64 {
	parent := map[string]string{}
	var find func(string) string
	find = func(x string) string {
		p, ok := parent[x]
		if !ok || p == x {
			parent[x] = x
			return x
		}
		r := find(p)
		parent[x] = r
		return r
	}
	for _, l := range links {
		if l[0] == "" || l[1] == "" {
			continue
		}
		a, b := find(l[0]), find(l[1])
		if a != b {
			parent[a] = b
		}
	}
	type family struct{ largest, exclusive, largestExclusive int64 }
	families := map[string]*family{}
	var total int64
	for _, m := range members {
		u, ok := usage[m.Path]
		if !ok {
			continue
		}
		if m.Memory {
			total += u.Referenced
			continue
		}
		own := u.Referenced
		if m.Image != "" {
			own -= usage[m.Image].Referenced
		}
		own = max(own, u.Exclusive, 0)
		f := families[find(m.Family)]
		if f == nil {
			f = &family{}
			families[find(m.Family)] = f
		}
		f.exclusive += u.Exclusive
		if own > f.largest {
			f.largest, f.largestExclusive = own, u.Exclusive
		}
	}
	for _, f := range families {
		// The largest member counts whole; the others by what they alone
		// hold (the largest's exclusive bytes are inside its whole).
		total += f.largest + f.exclusive - f.largestExclusive
	}
	return total
}

// AccountUsage is the bytes the account's sandboxes and checkpoints take
// in the pool, counted as the package comment above says.
func (d *Disks) AccountUsage(ctx context.Context, accountID int64) (int64, error) {
	sbs, err := d.cfg.Store.ListSandboxes(ctx, accountID, metadata.SandboxFilter{})
	if err != nil {
		return 0, err
	}
	cks, err := d.cfg.Store.ListCheckpoints(ctx, accountID, metadata.CheckpointFilter{IncludeAuto: true})
	if err != nil {
		return 0, err
	}
	usage, err := d.cfg.Pool.Usage(ctx)
	if err != nil {
		return 0, err
	}
	members, links := d.useMembers(sbs, cks)
	return accountUse(usage, members, links), nil
}

// useMembers lists the subvolumes of sandboxes and checkpoints, and the
// links between their families.
func (d *Disks) useMembers(sbs []metadata.Sandbox, cks []metadata.Checkpoint) ([]useMember, [][2]string) {
	pool := d.cfg.Pool
	sandboxOf := map[string]string{} // checkpoint id → its sandbox id
	for _, ck := range cks {
		sandboxOf[ck.ID] = ck.SandboxID
	}
	var members []useMember
	var links [][2]string
	for _, sb := range sbs {
		members = append(members, useMember{Family: sb.ID, Path: pool.Rel(pool.SandboxPath(sb.ID)), Image: imageRel(pool, sb.Image)})
		links = append(links, [2]string{sb.ID, sb.ParentID},
			[2]string{sb.ID, sandboxOf[sb.SourceCheckpoint]},
			[2]string{sb.ID, sandboxOf[sb.CurrentCheckpoint]})
	}
	for _, ck := range cks {
		if ck.DiskPath != "" {
			members = append(members, useMember{Family: ck.SandboxID, Path: ck.DiskPath, Image: imageRel(pool, ck.Image)})
		}
		if ck.MemoryPath != "" {
			members = append(members, useMember{Family: ck.SandboxID, Path: ck.MemoryPath, Memory: true})
		}
	}
	return members, links
}

func imageRel(pool *volume.Pool, image string) string {
	if image == "" {
		return ""
	}
	return pool.Rel(pool.ImagePath(image))
}

// LimitOf is the disk limit that holds for the account: its own, else the
// host's default (cairnd --disk-limit); 0 is unlimited.
func (d *Disks) LimitOf(acct metadata.Account) int64 {
	if acct.DiskLimit > 0 {
		return acct.DiskLimit
	}
	return d.cfg.DiskLimit
}

// CheckLimit fails with L04 when what the account's sandboxes and
// checkpoints take has reached its disk limit. Nothing stored is touched.
func (d *Disks) CheckLimit(ctx context.Context, accountID int64) error {
	acct, err := metadata.AccountByID(ctx, d.cfg.Store, accountID)
	if err != nil {
		return err
	}
	limit := d.LimitOf(acct)
	if limit <= 0 {
		return nil
	}
	used, err := d.AccountUsage(ctx, accountID)
	if err != nil {
		return err
	}
	if used >= limit {
		return errdefs.New(api.CodeDiskLimit, "the account's disk limit is reached (%d of %d bytes used by its sandboxes and checkpoints); delete checkpoints or sandboxes to make room",
			used, limit)
	}
	return nil
}
