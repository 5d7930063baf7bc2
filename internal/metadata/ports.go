package metadata

import (
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
