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

// EvacuateRequest is the body of POST /v1/hosts/{name}/evacuate: restore
// each sandbox of the host, which is down, on a host that is up from its
// newest off-site checkpoint (docs/several-hosts.md).
type EvacuateRequest struct {
	// To is the host every sandbox goes to; "": each goes to the host
	// that is up and runs the fewest sandboxes, counting the ones
	// placed before it.
	To string `json:"to,omitempty"`
	// Sandboxes limits the evacuation to the sandboxes with these ids;
	// none: every sandbox the host holds, of every account.
	Sandboxes []string `json:"sandboxes,omitempty"`
	// Whole fetches each disk whole before its sandbox starts; without
	// it the restores are lazy (docs/lazy-restore.md).
	Whole bool `json:"whole,omitempty"`
}

// EvacuationReport is the result of an evacuation.
type EvacuationReport struct {
	Host      string      `json:"host"` // the host evacuated
	Sandboxes []Evacuated `json:"sandboxes"`
	// Restored counts the sandboxes restored on another host, Failed the
	// ones that were not (each has its Error); Lost the checkpoints only
	// the lost host's pool holds.
	Restored int `json:"restored"`
	Failed   int `json:"failed"`
	Lost     int `json:"lost"`
}

// Evacuated is one sandbox of a lost host, restored on another host under
// its name and id, or not (Error).
type Evacuated struct {
	Account string `json:"account"`
	Name    string `json:"name"`
	ID      string `json:"id"`
	// Host is the host it is on now: the one it was restored on, or the
	// lost one when it was not.
	Host string `json:"host"`
	// Checkpoint is the id (v3) and GlobalID the global id of the
	// checkpoint its disk was restored from.
	Checkpoint string `json:"checkpoint,omitempty"`
	GlobalID   string `json:"global_id,omitempty"`
	// Memory is true when its processes resumed from the checkpoint's
	// memory image.
	Memory bool `json:"memory,omitempty"`
	// Lazy is true when its disk is filled in the background as it is
	// read (docs/lazy-restore.md).
	Lazy bool `json:"lazy,omitempty"`
	// State is its state now (running, stopped).
	State string `json:"state,omitempty"`
	// Lost lists its checkpoints that had no off-site copy: only the lost
	// host's pool holds them, out of reach while it is down.
	Lost  []LostCheckpoint `json:"lost,omitempty"`
	Error *ErrorInfo       `json:"error,omitempty"`
}

// LostCheckpoint is a checkpoint that only a lost host's pool holds.
type LostCheckpoint struct {
	ID        string    `json:"id"` // v3
	GlobalID  string    `json:"global_id"`
	CreatedAt time.Time `json:"created_at"`
}
