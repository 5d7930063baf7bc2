package metadata

import (
	"context"
	"errors"
	"time"
)

// Host is one cairnd of the set-up: the hosts that share one metadata
// store (PostgreSQL) register themselves, and each sandbox and each
// checkpoint's disk names the host whose pool holds it. With SQLite there
// is one host.
type Host struct {
	ID   string // the data dir's host-id, immutable
	Name string // unique among the hosts; what --host and `cairn host list` show
	// APIAddress is the host:port of its HTTPS API (--listen) as the
	// other hosts dial it; "" when it has none (it then cannot be
	// forwarded to).
	APIAddress string
	// TLSFingerprint is the fingerprint of the certificate its API
	// listener serves (apitls.Fingerprint): the other hosts pin it.
	TLSFingerprint string
	// PeerKeyHash is the SHA-256 (hex) of the key the host signs the
	// requests it forwards with, made at each of its starts.
	PeerKeyHash string
	// Capacity is how many running sandboxes the host is meant for; 0:
	// no bound.
	Capacity    int
	StartedAt   time.Time
	HeartbeatAt time.Time
}

// Validate checks what RegisterHost needs.
func (h Host) Validate() error {
	switch {
	case h.ID == "":
		return errors.New("host id is empty")
	case h.Name == "":
		return errors.New("host name is empty")
	case h.Capacity < 0:
		return errors.New("host capacity is negative")
	}
	return ValidateHostName(h.Name)
}

// ValidateHostName checks a host's name: 1 to 63 letters, digits, '-',
// '_' and '.', starting with a letter or digit.
func ValidateHostName(name string) error {
	if len(name) == 0 || len(name) > 63 {
		return errors.New("a host name has 1 to 63 characters")
	}
	for i, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			i > 0 && (c == '-' || c == '_' || c == '.')
		if !ok {
			return errors.New("a host name is letters, digits, '-', '_' and '.', starting with a letter or digit")
		}
	}
	return nil
}

// HostStore keeps the hosts.
type HostStore interface {
	// RegisterHost records h (by h.ID: made, or its other fields set),
	// with StartedAt and HeartbeatAt now, and returns it as stored. A name
	// another host has is ErrConflict. The first host ever registered
	// takes the sandboxes, checkpoints and disk deletes that name no host
	// (made before hosts existed, when one cairnd held the store), in the
	// same transaction.
	RegisterHost(ctx context.Context, h Host) (Host, error)
	// Heartbeat sets the host's HeartbeatAt to now; ErrNotFound when there
	// is no such host.
	Heartbeat(ctx context.Context, id string) error
	// ListHosts returns every host, ordered by name.
	ListHosts(ctx context.Context) ([]Host, error)
	// MoveSandbox makes the sandbox with that id the host to's, its disk
	// restored there from checkpoint current (an evacuation of a host
	// that is down): its host_id goes from from to to, its current
	// checkpoint is current, its saved session (a memory image in the
	// old host's pool) is forgotten and UpdatedAt is now. ErrNotFound
	// when there is no such sandbox or no checkpoint current of it;
	// ErrConflict when the row no longer names from (another host took it
	// over first), or when from's heartbeat is younger than downAfter
	// (it came back: the move would leave the sandbox running on two
	// hosts).
	MoveSandbox(ctx context.Context, id, from, to, current string, downAfter time.Duration) error
}
