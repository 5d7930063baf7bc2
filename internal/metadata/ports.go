package metadata

import (
	"context"
	"fmt"
	"time"
)

// MinPort and MaxPort bound the TCP port numbers a sandbox can publish.
const (
	MinPort = 1
	MaxPort = 65535
)

// PublishedPort is a TCP port inside a sandbox that cairnd's port proxy
// forwards to (see package portproxy). It belongs to its sandbox: deleting
// the sandbox deletes it.
type PublishedPort struct {
	SandboxID string
	Port      int // MinPort to MaxPort, inside the sandbox
	// Public: reachable through the proxy without the account's
	// credentials. Private (false): a request must carry them.
	Public    bool
	CreatedAt time.Time // when it was first published; a change of Public keeps it
}

// ValidatePort checks that port is a TCP port number a sandbox can
// publish, MinPort to MaxPort.
func ValidatePort(port int) error {
	if port < MinPort || port > MaxPort {
		return fmt.Errorf("port %d is out of range %d-%d", port, MinPort, MaxPort)
	}
	return nil
}

// Validate checks what the store relies on: a sandbox id and a port in
// range.
func (p PublishedPort) Validate() error {
	if p.SandboxID == "" {
		return fmt.Errorf("invalid published port %d: no sandbox id", p.Port)
	}
	if err := ValidatePort(p.Port); err != nil {
		return fmt.Errorf("invalid published port of sandbox %s: %w", p.SandboxID, err)
	}
	return nil
}

// PortStore is the part of the Store that keeps published ports and each
// account's port token, under the Store's guarantees (atomic, durable,
// sentinel errors).
type PortStore interface {
	// PublishPort publishes p.Port of sandbox p.SandboxID, or, when it is
	// published already, records p.Public as whether it is public and
	// keeps its CreatedAt. It returns the port as stored. p must pass
	// p.Validate (else a plain error); a zero CreatedAt is set to now;
	// ErrNotFound if no sandbox has that id. Deleting the sandbox deletes
	// its published ports.
	PublishPort(ctx context.Context, p PublishedPort) (PublishedPort, error)
	// UnpublishPort removes the published port, or returns ErrNotFound if
	// the sandbox (or no sandbox with that id) has not published it.
	UnpublishPort(ctx context.Context, sandboxID string, port int) error
	// Port returns the sandbox's published port, or ErrNotFound if the
	// sandbox (or no sandbox with that id) has not published it.
	Port(ctx context.Context, sandboxID string, port int) (PublishedPort, error)
	// Ports returns the sandbox's published ports by port number, empty
	// (not ErrNotFound) for a sandbox with none or no sandbox with that id.
	Ports(ctx context.Context, sandboxID string) ([]PublishedPort, error)
	// CopyPorts publishes every port of sandbox fromID on sandbox toID as
	// it is there (public or private), with CreatedAt now: a fork or a
	// restore as a new sandbox gets the ports of its source. A port toID
	// has published already takes fromID's Public; toID's other ports
	// stay. ErrNotFound if no sandbox has id toID; a fromID with no ports,
	// or no sandbox with that id (a source deleted since), copies nothing.
	CopyPorts(ctx context.Context, fromID, toID string) error

	// PortToken returns the account's port token (see package portproxy),
	// or ErrNotFound if it has none yet (or there is no such account).
	PortToken(ctx context.Context, accountID int64) (string, error)
	// EnsurePortToken returns the account's port token, storing candidate
	// as the token first if it has none: concurrent calls all return the
	// one stored. An empty candidate is a plain error; ErrNotFound if
	// there is no such account.
	EnsurePortToken(ctx context.Context, accountID int64, candidate string) (string, error)
	// SetPortToken replaces the account's port token with token (a
	// rotation: the old one is refused from then on), or stores it if it
	// had none. An empty token is a plain error; ErrNotFound if there is
	// no such account.
	SetPortToken(ctx context.Context, accountID int64, token string) error
}
