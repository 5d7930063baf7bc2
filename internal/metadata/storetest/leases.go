package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// testLeases runs the lease tests, each with its own database.
func testLeases(t *testing.T, open OpenFunc) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, OpenFunc)
	}{
		{"AcquireAndList", testLeaseAcquireAndList},
		{"SharedAndExclusive", testLeaseSharedAndExclusive},
		{"OldestConflict", testLeaseOldestConflict},
		{"IDs", testLeaseIDs},
		{"Expiry", testLeaseExpiry},
		{"Renew", testLeaseRenew},
		{"Release", testLeaseRelease},
		{"Revoke", testLeaseRevoke},
		{"Reclaim", testLeaseReclaim},
		{"InvalidInput", testLeaseInvalidInput},
		{"CancelledContext", testLeaseCancelledContext},
		{"Persistence", testLeasePersistence},
		{"ConcurrentAcquire", testLeaseConcurrentAcquire},
		{"Exclusion", testLeaseExclusion},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

// Owners of the leases the tests take.
const (
	ownerA  = "host/a/1"
	ownerA2 = "host/a/10"
	ownerB  = "host/b/1"
)

// newLease returns a lease of resource that expires after d by clock.
func newLease(id, resource string, exclusive bool, owner, purpose string, clock *Clock, d time.Duration) metadata.Lease {
	return metadata.Lease{ID: id, Resource: resource, Exclusive: exclusive, Owner: owner, Purpose: purpose,
		Expires: clock.Now().Add(d)}
}

// storedLease returns l as the store returns it when acquired at clock's
// time with a zero CreatedAt.
func storedLease(l metadata.Lease, clock *Clock) metadata.Lease {
	l.Expires = stored(l.Expires)
	if l.CreatedAt.IsZero() {
		l.CreatedAt = clock.Now()
	}
	l.CreatedAt = stored(l.CreatedAt)
	return l
}

func acquire(t *testing.T, s metadata.Store, l metadata.Lease) metadata.Lease {
	t.Helper()
	got, err := s.AcquireLease(context.Background(), l)
	if err != nil {
		t.Fatalf("AcquireLease(%s of %s): %v", l.ID, l.Resource, err)
	}
	return got
}

// sameLease fails unless got equals want field by field, times compared as
// instants and required in UTC.
func sameLease(t *testing.T, what string, got, want metadata.Lease) {
	t.Helper()
	checkUTC(t, what, got.Expires, got.CreatedAt)
	g, w := got, want
	g.Expires, g.CreatedAt, w.Expires, w.CreatedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if g != w {
		t.Errorf("%s:\n got  %+v\n want %+v", what, g, w)
	}
	if !got.Expires.Equal(want.Expires) || !got.CreatedAt.Equal(want.CreatedAt) {
		t.Errorf("%s: expires %v created %v, want %v and %v", what, got.Expires, got.CreatedAt, want.Expires, want.CreatedAt)
	}
}

// sameLeases fails unless got is want, in that order.
func sameLeases(t *testing.T, what string, got []metadata.Lease, want ...metadata.Lease) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s = %v, want %v", what, leaseIDs(got), leaseIDs(want))
		return
	}
	for i := range got {
		sameLease(t, fmt.Sprintf("%s[%d]", what, i), got[i], want[i])
	}
}

func leaseIDs(ls []metadata.Lease) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.ID
	}
	return out
}

// leases returns the live leases of resource ("" = all).
func leases(t *testing.T, s metadata.Store, resource string) []metadata.Lease {
	t.Helper()
	ls, err := s.Leases(context.Background(), resource)
	if err != nil {
		t.Fatalf("Leases(%q): %v", resource, err)
	}
	return ls
}

// wantPlainErr fails unless err is an error and none of the sentinels.
func wantPlainErr(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil || errors.Is(err, metadata.ErrNotFound) || errors.Is(err, metadata.ErrConflict) || errors.Is(err, metadata.ErrRevoked) {
		t.Errorf("%s: err = %v, want a plain error", what, err)
	}
}

// testLeaseAcquireAndList: a lease reads back as given, times in the
// store's form, CreatedAt from the clock when zero; Leases lists the live
// leases of one resource or all, oldest first.
func testLeaseAcquireAndList(t *testing.T, open OpenFunc) {
	s, clock := openStore(t, open)
	if got := leases(t, s, ""); len(got) != 0 {
		t.Errorf("Leases on a new store = %v", leaseIDs(got))
	}

	l1 := newLease("l1", "sandbox/0000000000000001", true, ownerA, "restoring", clock, time.Minute)
	got := acquire(t, s, l1)
	want1 := storedLease(l1, clock)
	sameLease(t, "AcquireLease", got, want1)
	if got.Revoked {
		t.Errorf("a new lease is revoked")
	}

	// A given CreatedAt is kept, in the store's form; it orders the list.
	clock.Advance(time.Second)
	l2 := newLease("l2", "checkpoint/c000000000000001", false, ownerB, "upload", clock, time.Hour)
	l2.CreatedAt = clock.Now().Add(-time.Hour).In(time.FixedZone("UTC-7", -7*60*60))
	want2 := storedLease(l2, clock)
	sameLease(t, "AcquireLease with CreatedAt", acquire(t, s, l2), want2)
	clock.Advance(time.Second)
	l3 := newLease("l3", "checkpoint/c000000000000001", false, ownerA, "browse", clock, time.Hour)
	want3 := storedLease(l3, clock)
	acquire(t, s, l3)

	sameLeases(t, "Leases(all)", leases(t, s, ""), want2, want1, want3)
	sameLeases(t, "Leases(sandbox)", leases(t, s, l1.Resource), want1)
	sameLeases(t, "Leases(checkpoint)", leases(t, s, l2.Resource), want2, want3)
	if got := leases(t, s, "sandbox/ffffffffffffffff"); len(got) != 0 {
		t.Errorf("Leases(resource without leases) = %v", leaseIDs(got))
	}
	// A resource is matched whole, not as a prefix.
	if got := leases(t, s, "checkpoint/"); len(got) != 0 {
		t.Errorf("Leases(prefix of a resource) = %v", leaseIDs(got))
	}
}

// testLeaseSharedAndExclusive: shared leases go together; an exclusive one
// goes with nothing; resources are independent; a failed acquire stores
// nothing.
func testLeaseSharedAndExclusive(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	const r1, r2 = "checkpoint/c000000000000001", "sandbox/0000000000000001"

	s1 := acquire(t, s, newLease("s1", r1, false, ownerA, "upload", clock, time.Minute))
	clock.Advance(time.Millisecond)
	s2 := acquire(t, s, newLease("s2", r1, false, ownerB, "browse", clock, time.Minute))

	x := newLease("x1", r1, true, ownerA, "delete", clock, time.Minute)
	held, err := s.AcquireLease(ctx, x)
	wantErr(t, "exclusive over two shared", err, metadata.ErrConflict)
	sameLease(t, "the lease an exclusive acquire conflicted with", held, s1)

	// Another resource is free.
	e := acquire(t, s, newLease("e1", r2, true, ownerA, "restoring", clock, time.Minute))
	held, err = s.AcquireLease(ctx, newLease("e2", r2, true, ownerB, "checkpoint", clock, time.Minute))
	wantErr(t, "exclusive over exclusive", err, metadata.ErrConflict)
	sameLease(t, "conflicting exclusive", held, e)
	held, err = s.AcquireLease(ctx, newLease("e3", r2, false, ownerA, "browse", clock, time.Minute))
	wantErr(t, "shared over exclusive", err, metadata.ErrConflict)
	sameLease(t, "exclusive a shared acquire conflicted with", held, e)
	sameLeases(t, "after the failed acquires", leases(t, s, ""), s1, s2, e)

	// The conflict moves to the next lease when one is released, and ends
	// with the last.
	if err := s.ReleaseLease(ctx, s1.ID); err != nil {
		t.Fatal(err)
	}
	held, err = s.AcquireLease(ctx, x)
	wantErr(t, "exclusive over one shared", err, metadata.ErrConflict)
	sameLease(t, "the remaining shared lease", held, s2)
	if err := s.ReleaseLease(ctx, s2.ID); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Millisecond)
	got := acquire(t, s, x)
	sameLease(t, "exclusive once the resource is free", got, storedLease(x, clock))
	held, err = s.AcquireLease(ctx, newLease("s3", r1, false, ownerB, "upload", clock, time.Minute))
	wantErr(t, "shared over the new exclusive", err, metadata.ErrConflict)
	sameLease(t, "the new exclusive", held, got)
	sameLeases(t, "at the end", leases(t, s, ""), e, got)
}

// testLeaseOldestConflict: of several conflicting leases, the oldest is
// returned: by CreatedAt, then in the order they were acquired.
func testLeaseOldestConflict(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	const r = "checkpoint/c000000000000001"
	at := clock.Now()
	mk := func(id string, created time.Time) metadata.Lease {
		l := newLease(id, r, false, ownerA, "upload", clock, time.Minute)
		l.CreatedAt = created
		return acquire(t, s, l)
	}
	// Acquired in this order, created in another; two at the same instant.
	late := mk("late", at.Add(2*time.Second))
	tie1 := mk("tie1", at.Add(time.Second))
	tie2 := mk("tie2", at.Add(time.Second))
	early := mk("early", at)
	sameLeases(t, "Leases", leases(t, s, r), early, tie1, tie2, late)

	held, err := s.AcquireLease(ctx, newLease("x", r, true, ownerB, "delete", clock, time.Minute))
	wantErr(t, "exclusive over four", err, metadata.ErrConflict)
	sameLease(t, "oldest by CreatedAt", held, early)
	if err := s.ReleaseLease(ctx, early.ID); err != nil {
		t.Fatal(err)
	}
	held, err = s.AcquireLease(ctx, newLease("x", r, true, ownerB, "delete", clock, time.Minute))
	wantErr(t, "exclusive over three", err, metadata.ErrConflict)
	sameLease(t, "the first acquired of two created at once", held, tie1)
}

// testLeaseIDs: a lease id is unique among the stored leases, whatever
// their resource; it is free again once its lease is released.
func testLeaseIDs(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	first := acquire(t, s, newLease("dup", "checkpoint/c000000000000001", false, ownerA, "upload", clock, time.Minute))
	for _, l := range []metadata.Lease{
		newLease("dup", "checkpoint/c000000000000001", false, ownerA, "upload", clock, time.Minute),
		newLease("dup", "sandbox/0000000000000001", true, ownerB, "restoring", clock, time.Hour),
	} {
		held, err := s.AcquireLease(ctx, l)
		wantErr(t, "AcquireLease with a used id on "+l.Resource, err, metadata.ErrConflict)
		sameLease(t, "the lease that has the id", held, first)
	}
	sameLeases(t, "after the failed acquires", leases(t, s, ""), first)

	if err := s.ReleaseLease(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	again := newLease("dup", "sandbox/0000000000000001", true, ownerB, "restoring", clock, time.Hour)
	sameLease(t, "the id once released", acquire(t, s, again), storedLease(again, clock))
}

// testLeaseExpiry: a lease is live while the store's clock is before its
// Expires, to the microsecond; an expired lease conflicts with nothing, is
// not listed, and the next acquire of its resource deletes it.
func testLeaseExpiry(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	const r, other = "sandbox/0000000000000001", "sandbox/0000000000000002"
	e := acquire(t, s, newLease("e", r, true, ownerA, "restoring", clock, time.Minute))
	o := acquire(t, s, newLease("o", other, true, ownerA, "restoring", clock, time.Minute))

	clock.Advance(time.Minute - time.Microsecond)
	held, err := s.AcquireLease(ctx, newLease("s", r, false, ownerB, "browse", clock, time.Minute))
	wantErr(t, "a microsecond before the expiry", err, metadata.ErrConflict)
	sameLease(t, "the lease about to expire", held, e)
	sameLeases(t, "Leases a microsecond before", leases(t, s, ""), e, o)

	clock.Advance(time.Microsecond) // now == Expires: expired
	sameLeases(t, "Leases at the expiry", leases(t, s, ""))
	sameLeases(t, "Leases(r) at the expiry", leases(t, s, r))
	s1 := newLease("s", r, false, ownerB, "browse", clock, time.Minute)
	sameLease(t, "acquire over an expired lease", acquire(t, s, s1), storedLease(s1, clock))
	// That acquire deleted the expired lease of its resource: releasing it
	// finds nothing, where the other resource's is still there to release.
	err = s.ReleaseLease(ctx, e.ID)
	wantErr(t, "ReleaseLease of the expired lease the acquire deleted", err, metadata.ErrNotFound)
	sameLeases(t, "Leases after", leases(t, s, ""), storedLease(s1, clock))

	// An expired lease's id is free again once an acquire of its resource
	// deleted it, in the same call.
	clock.Advance(time.Hour)
	again := newLease(s1.ID, r, true, ownerA, "restoring", clock, time.Minute)
	sameLease(t, "acquire with the id of an expired lease of the resource", acquire(t, s, again), storedLease(again, clock))

	// Expiring now or before is refused.
	for _, d := range []time.Duration{0, -time.Second, time.Nanosecond} { // 1 ns: the same microsecond
		_, err := s.AcquireLease(ctx, newLease(fmt.Sprintf("bad%d", d), "sandbox/0000000000000003", true, ownerA, "x", clock, d))
		wantPlainErr(t, fmt.Sprintf("AcquireLease expiring in %v", d), err)
	}
	sameLeases(t, "Leases(refused)", leases(t, s, "sandbox/0000000000000003"))
}

// testLeaseRenew: renewing moves the expiry (either way) of a live lease
// that is not revoked; an expired, revoked, released or unknown one is
// not renewed.
func testLeaseRenew(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	const r = "checkpoint/c000000000000001"
	l := acquire(t, s, newLease("l", r, true, ownerA, "upload", clock, time.Minute))

	clock.Advance(30 * time.Second)
	until := clock.Now().Add(5 * time.Minute)
	if err := s.RenewLease(ctx, l.ID, until); err != nil {
		t.Fatalf("RenewLease: %v", err)
	}
	want := l
	want.Expires = stored(until)
	sameLeases(t, "after RenewLease", leases(t, s, r), want)
	// It outlives its first expiry.
	clock.Advance(time.Minute)
	_, err := s.AcquireLease(ctx, newLease("s", r, false, ownerB, "browse", clock, time.Minute))
	wantErr(t, "acquire past the first expiry", err, metadata.ErrConflict)
	// A renewal may shorten it.
	until = clock.Now().Add(time.Second)
	if err := s.RenewLease(ctx, l.ID, until); err != nil {
		t.Fatal(err)
	}
	want.Expires = stored(until)
	sameLeases(t, "after a shortening RenewLease", leases(t, s, r), want)

	// An expiry not after now is refused, and changes nothing.
	for _, at := range []time.Time{clock.Now(), clock.Now().Add(-time.Hour)} {
		wantPlainErr(t, fmt.Sprintf("RenewLease to %v", at), s.RenewLease(ctx, l.ID, at))
	}
	sameLeases(t, "after refused renewals", leases(t, s, r), want)

	// Once expired it cannot be renewed, and stays expired.
	clock.Advance(time.Second)
	err = s.RenewLease(ctx, l.ID, clock.Now().Add(time.Hour))
	wantErr(t, "RenewLease of an expired lease", err, metadata.ErrNotFound)
	sameLeases(t, "after renewing an expired lease", leases(t, s, r))
	acquire(t, s, newLease("s", r, true, ownerB, "delete", clock, time.Minute))

	// Revoked: ErrRevoked, expiry unchanged.
	rv := acquire(t, s, newLease("rv", "sandbox/0000000000000001", true, ownerA, "checkpoint", clock, time.Minute))
	if _, err := s.RevokeLeases(ctx, rv.Resource, ""); err != nil {
		t.Fatal(err)
	}
	err = s.RenewLease(ctx, rv.ID, clock.Now().Add(time.Hour))
	wantErr(t, "RenewLease of a revoked lease", err, metadata.ErrRevoked)
	want = rv
	want.Revoked = true
	sameLeases(t, "the revoked lease after RenewLease", leases(t, s, rv.Resource), want)

	// Released or never acquired: ErrNotFound.
	if err := s.ReleaseLease(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"s", "never"} {
		err := s.RenewLease(ctx, id, clock.Now().Add(time.Hour))
		wantErr(t, "RenewLease("+id+")", err, metadata.ErrNotFound)
	}
}

// testLeaseRelease: a release deletes the lease, live or expired, and
// frees its resource; a second release is ErrNotFound.
func testLeaseRelease(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	const r = "sandbox/0000000000000001"
	l := acquire(t, s, newLease("l", r, true, ownerA, "restoring", clock, time.Minute))
	keep := acquire(t, s, newLease("k", "sandbox/0000000000000002", true, ownerA, "restoring", clock, time.Minute))

	if err := s.ReleaseLease(ctx, l.ID); err != nil {
		t.Fatalf("ReleaseLease: %v", err)
	}
	sameLeases(t, "after ReleaseLease", leases(t, s, ""), keep)
	err := s.ReleaseLease(ctx, l.ID)
	wantErr(t, "second ReleaseLease", err, metadata.ErrNotFound)
	err = s.ReleaseLease(ctx, "never")
	wantErr(t, "ReleaseLease(unknown)", err, metadata.ErrNotFound)
	acquire(t, s, newLease("l2", r, true, ownerB, "checkpoint", clock, time.Minute))

	// An expired lease that nothing deleted yet is released as well.
	clock.Advance(time.Hour)
	if err := s.ReleaseLease(ctx, keep.ID); err != nil {
		t.Errorf("ReleaseLease of an expired lease: %v", err)
	}
	err = s.ReleaseLease(ctx, keep.ID)
	wantErr(t, "ReleaseLease of it again", err, metadata.ErrNotFound)
}

// testLeaseRevoke: RevokeLeases marks the live leases of one resource,
// of one purpose or all, and returns them; revoked leases still conflict
// until released.
func testLeaseRevoke(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	const r, other = "checkpoint/c000000000000001", "checkpoint/c000000000000002"
	up := acquire(t, s, newLease("up", r, false, ownerA, "upload", clock, time.Minute))
	clock.Advance(time.Millisecond)
	br := acquire(t, s, newLease("br", r, false, ownerB, "browse", clock, time.Minute))
	clock.Advance(time.Millisecond)
	up2 := acquire(t, s, newLease("up2", r, false, ownerB, "upload", clock, time.Minute))
	otherUp := acquire(t, s, newLease("ou", other, false, ownerA, "upload", clock, time.Minute))
	// An expired upload lease of r is not revoked (nor returned).
	exp := newLease("exp", r, false, ownerA, "upload", clock, time.Second)
	exp.CreatedAt = clock.Now().Add(-time.Hour)
	acquire(t, s, exp)
	clock.Advance(time.Second)

	revoked := func(l metadata.Lease) metadata.Lease {
		l.Revoked = true
		return l
	}
	got, err := s.RevokeLeases(ctx, r, "upload")
	if err != nil {
		t.Fatalf("RevokeLeases(upload): %v", err)
	}
	sameLeases(t, "RevokeLeases(upload)", got, revoked(up), revoked(up2))
	sameLeases(t, "Leases(r) after", leases(t, s, r), revoked(up), br, revoked(up2))
	sameLeases(t, "the other resource's", leases(t, s, other), otherUp)

	// A revoked lease still conflicts.
	held, err := s.AcquireLease(ctx, newLease("x", r, true, ownerB, "delete", clock, time.Minute))
	wantErr(t, "exclusive over revoked leases", err, metadata.ErrConflict)
	sameLease(t, "the revoked lease it conflicted with", held, revoked(up))

	// "" revokes every purpose, those already revoked included.
	got, err = s.RevokeLeases(ctx, r, "")
	if err != nil {
		t.Fatal(err)
	}
	sameLeases(t, "RevokeLeases(any purpose)", got, revoked(up), revoked(br), revoked(up2))
	got, err = s.RevokeLeases(ctx, "checkpoint/none", "")
	if err != nil || len(got) != 0 {
		t.Errorf("RevokeLeases(resource without leases) = %v, %v; want none", leaseIDs(got), err)
	}
	got, err = s.RevokeLeases(ctx, other, "browse")
	if err != nil || len(got) != 0 {
		t.Errorf("RevokeLeases(purpose nobody has) = %v, %v; want none", leaseIDs(got), err)
	}
	sameLeases(t, "the other resource's at the end", leases(t, s, other), otherUp)
	_, err = s.RevokeLeases(ctx, "", "upload")
	wantPlainErr(t, "RevokeLeases(empty resource)", err)

	// Once the holders let go, the resource is free.
	for _, l := range []metadata.Lease{up, br, up2} {
		if err := s.ReleaseLease(ctx, l.ID); err != nil {
			t.Fatalf("ReleaseLease(%s) of a revoked lease: %v", l.ID, err)
		}
	}
	acquire(t, s, newLease("x", r, true, ownerB, "delete", clock, time.Minute))
}

// testLeaseReclaim: ReclaimLeases deletes the expired leases, and those of
// owners with the prefix given, live or not, and returns them.
func testLeaseReclaim(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	got, err := s.ReclaimLeases(ctx, "")
	if err != nil || len(got) != 0 {
		t.Errorf("ReclaimLeases on a new store = %v, %v", leaseIDs(got), err)
	}

	a1 := acquire(t, s, newLease("a1", "sandbox/0000000000000001", true, ownerA, "restoring", clock, time.Hour))
	clock.Advance(time.Millisecond)
	a2 := acquire(t, s, newLease("a2", "checkpoint/c000000000000001", false, ownerA, "upload", clock, time.Hour))
	clock.Advance(time.Millisecond)
	a10 := acquire(t, s, newLease("a10", "checkpoint/c000000000000001", false, ownerA2, "browse", clock, time.Hour))
	clock.Advance(time.Millisecond)
	b1 := acquire(t, s, newLease("b1", "checkpoint/c000000000000002", false, ownerB, "upload", clock, time.Hour))
	odd := acquire(t, s, newLease("odd", "checkpoint/c000000000000003", false, "ho%t/_/1", "upload", clock, time.Hour))
	expB := acquire(t, s, newLease("expB", "checkpoint/c000000000000004", false, ownerB, "upload", clock, time.Minute))
	clock.Advance(time.Minute)

	// "": the expired ones only.
	got, err = s.ReclaimLeases(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	sameLeases(t, "ReclaimLeases(\"\")", got, expB)
	sameLeases(t, "Leases after", leases(t, s, ""), a1, a2, a10, b1, odd)
	err = s.ReleaseLease(ctx, expB.ID)
	wantErr(t, "ReleaseLease of a reclaimed lease", err, metadata.ErrNotFound)

	// A prefix is a plain prefix of bytes, no pattern: "host/_/" and "ho%"
	// match nothing here but "ho%t/_/1".
	for _, prefix := range []string{"host/_/", "host/%", "host/a/1/", "HOST/"} {
		got, err := s.ReclaimLeases(ctx, prefix)
		if err != nil || len(got) != 0 {
			t.Errorf("ReclaimLeases(%q) = %v, %v; want none", prefix, leaseIDs(got), err)
		}
	}
	// "host/a/1" is a prefix of "host/a/10" too; with the expired leases
	// of everyone.
	expired := acquire(t, s, newLease("expired", "checkpoint/c000000000000005", false, ownerB, "upload", clock, time.Second))
	clock.Advance(time.Second)
	got, err = s.ReclaimLeases(ctx, ownerA)
	if err != nil {
		t.Fatal(err)
	}
	sameLeases(t, "ReclaimLeases(host/a/1)", got, a1, a2, a10, expired)
	sameLeases(t, "Leases after reclaiming host a", leases(t, s, ""), b1, odd)
	for _, l := range []metadata.Lease{a1, a2, a10} {
		err := s.RenewLease(ctx, l.ID, clock.Now().Add(time.Hour))
		wantErr(t, "RenewLease of reclaimed "+l.ID, err, metadata.ErrNotFound)
	}
	got, err = s.ReclaimLeases(ctx, "ho%")
	if err != nil {
		t.Fatal(err)
	}
	sameLeases(t, "ReclaimLeases(ho%)", got, odd)
	// What was reclaimed is free.
	acquire(t, s, newLease("new", a1.Resource, true, ownerB, "restoring", clock, time.Minute))
}

func testLeaseInvalidInput(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	bad := map[string]func(*metadata.Lease){
		"empty id":       func(l *metadata.Lease) { l.ID = "" },
		"empty resource": func(l *metadata.Lease) { l.Resource = "" },
		"empty owner":    func(l *metadata.Lease) { l.Owner = "" },
		"no expiry":      func(l *metadata.Lease) { l.Expires = time.Time{} },
		"revoked":        func(l *metadata.Lease) { l.Revoked = true },
	}
	for what, mutate := range bad {
		l := newLease("l", "sandbox/0000000000000001", true, ownerA, "restoring", clock, time.Minute)
		mutate(&l)
		_, err := s.AcquireLease(ctx, l)
		wantPlainErr(t, "AcquireLease with "+what, err)
	}
	sameLeases(t, "after invalid acquires", leases(t, s, ""))
	// An empty purpose is allowed.
	l := newLease("l", "sandbox/0000000000000001", true, ownerA, "", clock, time.Minute)
	sameLease(t, "no purpose", acquire(t, s, l), storedLease(l, clock))
}

func testLeaseCancelledContext(t *testing.T, open OpenFunc) {
	s, clock := openStore(t, open)
	held := acquire(t, s, newLease("held", "sandbox/0000000000000001", true, ownerA, "restoring", clock, time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	if _, err := s.AcquireLease(ctx, newLease("l", "sandbox/0000000000000002", true, ownerA, "x", clock, time.Minute)); err == nil {
		t.Errorf("AcquireLease with a cancelled context succeeded")
	}
	if err := s.RenewLease(ctx, held.ID, clock.Now().Add(time.Hour)); err == nil {
		t.Errorf("RenewLease with a cancelled context succeeded")
	}
	if err := s.ReleaseLease(ctx, held.ID); err == nil {
		t.Errorf("ReleaseLease with a cancelled context succeeded")
	}
	if _, err := s.RevokeLeases(ctx, held.Resource, ""); err == nil {
		t.Errorf("RevokeLeases with a cancelled context succeeded")
	}
	if _, err := s.ReclaimLeases(ctx, ownerA); err == nil {
		t.Errorf("ReclaimLeases with a cancelled context succeeded")
	}
	if _, err := s.Leases(ctx, ""); err == nil {
		t.Errorf("Leases with a cancelled context succeeded")
	}
	sameLeases(t, "after the cancelled calls", leases(t, s, ""), held)
}

// testLeasePersistence: leases, revoked ones included, survive a reopen
// (a restart of cairnd on a host that stayed up).
func testLeasePersistence(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	clock := NewClock()
	s := open(t, clock.Now)
	l1 := acquire(t, s, newLease("l1", "sandbox/0000000000000001", true, ownerA, "restoring", clock, time.Hour))
	l2 := acquire(t, s, newLease("l2", "checkpoint/c000000000000001", false, ownerA, "upload", clock, time.Hour))
	gone := acquire(t, s, newLease("gone", "checkpoint/c000000000000002", false, ownerA, "upload", clock, time.Hour))
	if _, err := s.RevokeLeases(ctx, l2.Resource, "upload"); err != nil {
		t.Fatal(err)
	}
	if err := s.RenewLease(ctx, l1.ID, clock.Now().Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseLease(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	want := leases(t, s, "")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	clock.Advance(time.Minute)
	s2 := open(t, clock.Now)
	t.Cleanup(func() { s2.Close() })
	sameLeases(t, "after reopen", leases(t, s2, ""), want...)
	_, err := s2.AcquireLease(ctx, newLease("x", l1.Resource, false, ownerB, "browse", clock, time.Minute))
	wantErr(t, "acquire over a lease from before the reopen", err, metadata.ErrConflict)
	got, err := s2.ReclaimLeases(ctx, "host/a/")
	if err != nil {
		t.Fatal(err)
	}
	sameLeases(t, "reclaimed after reopen", got, want...)
}

// testLeaseConcurrentAcquire races acquires of one resource: of exclusive
// ones exactly one wins and every other is told who; shared ones all win.
func testLeaseConcurrentAcquire(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	const n = 16
	var wg sync.WaitGroup
	got := make([]metadata.Lease, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			got[i], errs[i] = s.AcquireLease(ctx, newLease(fmt.Sprintf("x%d", i), "sandbox/0000000000000001", true, ownerA, "restoring", clock, time.Minute))
		})
	}
	wg.Wait()
	var winner string
	for i, err := range errs {
		switch {
		case err == nil:
			if winner != "" {
				t.Errorf("two exclusive leases won: %s and %s", winner, got[i].ID)
			}
			winner = got[i].ID
		case !errors.Is(err, metadata.ErrConflict):
			t.Errorf("acquirer %d: %v, want nil or ErrConflict", i, err)
		}
	}
	for i, err := range errs {
		if err != nil && got[i].ID != winner {
			t.Errorf("acquirer %d was told %q holds the resource, not the winner %q", i, got[i].ID, winner)
		}
	}
	if ls := leases(t, s, "sandbox/0000000000000001"); len(ls) != 1 || ls[0].ID != winner {
		t.Errorf("Leases = %v, want [%s]", leaseIDs(ls), winner)
	}

	for i := range n {
		wg.Go(func() {
			_, errs[i] = s.AcquireLease(ctx, newLease(fmt.Sprintf("s%d", i), "checkpoint/c000000000000001", false, ownerA, "browse", clock, time.Minute))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("shared acquirer %d: %v", i, err)
		}
	}
	if ls := leases(t, s, "checkpoint/c000000000000001"); len(ls) != n {
		t.Errorf("%d shared leases, want %d", len(ls), n)
	}
}

// testLeaseExclusion uses exclusive leases as a lock, the way a sandbox's
// lifecycle changes take turns: workers spin on one resource, and no two
// ever hold it at once.
func testLeaseExclusion(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	const workers, each = 4, 10
	var (
		wg      sync.WaitGroup
		holders atomic.Int32
		mu      sync.Mutex
		fails   []error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		fails = append(fails, err)
	}
	for w := range workers {
		wg.Go(func() {
			for i := 0; i < each; {
				l, err := s.AcquireLease(ctx, newLease(fmt.Sprintf("w%d-%d", w, i), "sandbox/0000000000000001", true,
					fmt.Sprintf("host/a/%d", w), "checkpoint", clock, time.Hour))
				if errors.Is(err, metadata.ErrConflict) {
					time.Sleep(time.Millisecond)
					continue
				} else if err != nil {
					fail(err)
					return
				}
				if n := holders.Add(1); n != 1 {
					fail(fmt.Errorf("%d holders of an exclusive lease", n))
				}
				time.Sleep(100 * time.Microsecond)
				holders.Add(-1)
				if err := s.ReleaseLease(ctx, l.ID); err != nil {
					fail(err)
					return
				}
				i++
			}
		})
	}
	wg.Wait()
	for _, err := range fails {
		t.Error(err)
	}
	sameLeases(t, "at the end", leases(t, s, ""))
}
