package checkpoint

import (
	"slices"
	"strings"
	"time"
)

// The retention policy of automatic checkpoints (DESIGN §3). Every window
// is half-open at its old end, (now-d, now]: a checkpoint whose age is
// exactly d is outside it.
const (
	keepNewest   = 3                   // the newest three, whatever their age
	keepAll      = time.Hour           // every one younger than this
	keepHourly   = 24 * time.Hour      // the newest of each UTC clock hour within this
	keepDaily    = 14 * 24 * time.Hour // the newest of each UTC calendar day within this
	hourLayout   = "2006-01-02T15"
	dayLayout    = "2006-01-02"
	reasonFuture = "newer than now"
)

// DeletedRetention is how long the automatic checkpoints of a deleted
// sandbox stay restorable after the deletion; then they all go.
const DeletedRetention = 14 * 24 * time.Hour

// Candidate is an automatic checkpoint of one sandbox, as retention sees it.
type Candidate struct {
	ID        string    // e.g. "auto-20261129T091500Z" (opaque to the policy)
	CreatedAt time.Time // any location; buckets use its UTC value
}

// Decision is what the policy says about one candidate.
type Decision struct {
	ID     string
	Keep   bool
	Reason string // e.g. "newest 3", "newest of hour 2026-11-29T08", "not the newest of its day"
}

// Retain applies the retention policy of automatic checkpoints of ONE
// sandbox, counted back from now: the newest three always; every one from
// the last hour; the newest of each hour for 24 h; the newest of each day
// for 14 days; the rest removed. Manual and named checkpoints are never
// passed in (callers filter them). It returns one Decision per candidate,
// in the input order, and reads no clock but now.
//
// Precisely, with age = now - CreatedAt:
//
//   - A candidate created after now (clock skew) is kept, "newer than now",
//     and is otherwise invisible to the policy: it takes none of the three
//     newest places and claims no hour or day.
//   - "newest 3": the three newest candidates not after now, whatever their
//     age (so fewer than four such candidates are all kept).
//   - "within the last hour": 0 <= age < 1h, i.e. CreatedAt in (now-1h, now].
//     A candidate exactly one hour old is not in the last hour.
//   - "newest of hour YYYY-MM-DDTHH": hours are UTC clock hours
//     (CreatedAt truncated to the hour, in UTC). Among the candidates with
//     0 <= age < 24h, the newest of each hour is kept. The window cuts the
//     oldest hour: when now is 12:30, the 12:xx hour of yesterday counts
//     only its candidates after 12:30, so up to 25 hours are kept.
//   - "newest of day YYYY-MM-DD": days are UTC calendar days. Among the
//     candidates with 0 <= age < 14×24h, the newest of each day is kept,
//     the oldest day cut by the window in the same way (up to 15 days).
//   - Removed: "older than 14 days" when age >= 14×24h; otherwise "not the
//     newest of its hour" when age < 24h, else "not the newest of its day".
//
// The rules are independent: a candidate is the newest of its hour or day
// whether or not an earlier rule already keeps it, so a newer candidate
// kept as one of the newest three still makes the older ones of its hour
// removable. A candidate kept by several rules reports the first in the
// order above. "Newest" orders by CreatedAt, then by ID (the greater ID is
// the newer), then by input position (the earlier is the newer), so the
// decisions for distinct candidates do not depend on the input order.
func Retain(cands []Candidate, now time.Time) []Decision {
	out := make([]Decision, len(cands))
	order := make([]int, len(cands))
	for i := range order {
		order[i] = i
	}
	// Newest first; the stable sort puts equal candidates in input order.
	slices.SortStableFunc(order, func(a, b int) int {
		ca, cb := cands[a], cands[b]
		if c := cb.CreatedAt.Compare(ca.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(cb.ID, ca.ID)
	})

	var (
		ranked int                     // candidates seen that are not after now
		hours  = make(map[int64]bool)  // UTC hours whose newest was seen
		days   = make(map[string]bool) // UTC days whose newest was seen
	)
	for _, i := range order {
		c := cands[i]
		d := Decision{ID: c.ID}
		if c.CreatedAt.After(now) {
			d.Keep, d.Reason = true, reasonFuture
			out[i] = d
			continue
		}
		age := now.Sub(c.CreatedAt) // >= 0; saturates for absurd ages, still >= keepDaily
		utc := c.CreatedAt.UTC()
		hour, day := utc.Truncate(time.Hour), utc.Format(dayLayout)

		// Claim buckets before choosing a reason: the first candidate seen
		// in a bucket is its newest, whichever rule keeps it.
		newestOfHour := age < keepHourly && !hours[hour.Unix()]
		if newestOfHour {
			hours[hour.Unix()] = true
		}
		newestOfDay := age < keepDaily && !days[day]
		if newestOfDay {
			days[day] = true
		}
		ranked++

		switch {
		case ranked <= keepNewest:
			d.Keep, d.Reason = true, "newest 3"
		case age < keepAll:
			d.Keep, d.Reason = true, "within the last hour"
		case newestOfHour:
			d.Keep, d.Reason = true, "newest of hour "+hour.Format(hourLayout)
		case newestOfDay:
			d.Keep, d.Reason = true, "newest of day "+day
		case age >= keepDaily:
			d.Reason = "older than 14 days"
		case age < keepHourly:
			d.Reason = "not the newest of its hour"
		default:
			d.Reason = "not the newest of its day"
		}
		out[i] = d
	}
	return out
}

// ExpiredAfterDelete reports whether the automatic checkpoints of a sandbox
// deleted at deletedAt are due for removal at now: true once now is at or
// past deletedAt + DeletedRetention. Until then all of them are kept, as
// they are at the deletion (the caller does not thin them with Retain);
// from then on all of them go. A zero deletedAt means the sandbox was not
// deleted and never expires; a deletion after now (clock skew) has not
// expired.
func ExpiredAfterDelete(deletedAt, now time.Time) bool {
	if deletedAt.IsZero() {
		return false
	}
	return !now.Before(deletedAt.Add(DeletedRetention))
}
