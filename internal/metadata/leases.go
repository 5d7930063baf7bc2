package metadata

import (
	"errors"
	"fmt"
	"time"
)

// Lease holds a resource for a purpose until it is released, revoked or
// expires. Leases are how cairnd says that work is in flight on something
// (an upload reading a checkpoint's disk, a restore replacing a sandbox's
// root) and how it keeps one lifecycle change at a time per sandbox: an
// exclusive lease of "sandbox/<id>" is that sandbox's lock, and its
// Purpose the sandbox's busy state. They live in the store, not in the
// process, so that they outlive a crash of their holder (until they
// expire, or are reclaimed) and can later be held across hosts.
//
// The store keeps the rules of AcquireLease and no more: what a resource
// is, which purposes exist and what a holder does when its lease is
// revoked are the caller's.
type Lease struct {
	ID       string // chosen by the caller (random hex); unique among the stored leases
	Resource string // what is held, e.g. "sandbox/<id>", "checkpoint/<id>"
	// Exclusive: the lease conflicts with every other live lease of the
	// resource. Shared (false): it conflicts only with a live exclusive one.
	Exclusive bool
	// Owner is who holds it, e.g. "host/<host id>/<instance>"; it lets
	// another host hold leases later, and a restarted cairnd reclaim what
	// its dead predecessor held (ReclaimLeases by owner prefix).
	Owner string
	// Purpose is what the lease is for, shown to people and used as a
	// sandbox's busy state: "upload", "restoring", "checkpoint"…
	Purpose string
	// Revoked is set by RevokeLeases: the holder is to stop and release
	// the lease. A revoked lease still conflicts until it is released or
	// expires, so that what revokes it can wait for the holder to let go.
	Revoked bool
	// Expires is when the lease ends on its own: it is live while the
	// store's clock is before Expires. A holder that needs longer renews
	// it (RenewLease) before then.
	Expires   time.Time
	CreatedAt time.Time
}

// Validate checks a lease given to AcquireLease for what the store relies
// on: an id, a resource, an owner, an expiry, and not revoked (a new lease
// never is). Whether Expires is after now is the store's to check, with
// its clock.
func (l Lease) Validate() error {
	switch {
	case l.ID == "":
		return errors.New("invalid lease: empty id")
	case l.Resource == "":
		return fmt.Errorf("invalid lease %s: empty resource", l.ID)
	case l.Owner == "":
		return fmt.Errorf("invalid lease %s of %s: empty owner", l.ID, l.Resource)
	case l.Expires.IsZero():
		return fmt.Errorf("invalid lease %s of %s: no expiry", l.ID, l.Resource)
	case l.Revoked:
		return fmt.Errorf("invalid lease %s of %s: a new lease cannot be revoked", l.ID, l.Resource)
	}
	return nil
}
