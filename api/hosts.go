package api

import "time"

// Host is one cairnd of the set-up: every host that shares the metadata
// database (GET /v1/hosts; see docs/several-hosts.md).
type Host struct {
	Name string `json:"name"`
	ID   string `json:"id"`
	// State is HostUp or HostDown.
	State string `json:"state"`
	// API is the ADDR:PORT the other hosts reach its API at; "" when it
	// has none (requests for its sandboxes cannot be forwarded to it).
	API string `json:"api,omitempty"`
	// Capacity is how many running sandboxes it is meant for; 0: no bound.
	Capacity int `json:"capacity,omitempty"`
	// Running is how many sandboxes run on it; Sandboxes how many it
	// holds, of every account.
	Running   int `json:"running"`
	Sandboxes int `json:"sandboxes"`
	// This is true for the host that answered.
	This        bool      `json:"this,omitempty"`
	StartedAt   time.Time `json:"started_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
}

// Host states.
const (
	HostUp   = "up"
	HostDown = "down"
)

// Headers of a request one host forwards to another (see
// docs/several-hosts.md): PeerHeader proves the forwarding host
// ("HOST-ID KEY"); CallerHeader says whom the request speaks for:
// CallerToken (its Authorization header is the caller's, checked again
// by the host it reaches) or CallerSocket (the unix socket's
// administrator). A client's own headers of these names are refused.
const (
	PeerHeader   = "Cairn-Peer"
	CallerHeader = "Cairn-Caller"
	CallerToken  = "token"
	CallerSocket = "socket"
)
