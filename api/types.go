package api

import (
	"strings"
	"time"
)

// Sandbox states as reported by the API.
const (
	StateRunning   = "running"
	StateStopped   = "stopped"
	StateStarting  = "starting"
	StateStopping  = "stopping"
	StateCreating  = "creating"
	StateDeleting  = "deleting"
	StateError     = "error"
	StateRestoring = "restoring"
	// StateCrashed: the sandbox should run but its processes died without
	// cairnd stopping them; LastCrash says why. Its restart policy decides
	// whether cairnd starts it again.
	StateCrashed = "crashed"
	// StateSleeping: idle past its --idle, its session is saved (memory
	// kept on disk, no host memory used); an exec, a port connection or
	// a start wakes it, resuming its processes.
	StateSleeping = "sleeping"
	// StateHostDown: the host the sandbox is on is down (its heartbeat
	// stopped); nothing can reach the sandbox until it is back.
	StateHostDown = "host down"
)

// Restart policies of a sandbox (Sandbox.Restart, --restart).
const (
	RestartOnFailure = "on-failure" // the default: start it again after a crash, with backoff and a limit
	RestartAlways    = "always"     // also when it ended by itself (its init exited)
	RestartNo        = "no"         // a sandbox that died stays crashed
)

// SandboxEvent is something that happened to a sandbox, and when.
type SandboxEvent struct {
	What string    `json:"what"`
	At   time.Time `json:"at"`
}

// SandboxActivity is one entry of a sandbox's event stream
// (GET /v1/sandboxes/{name}/events, `cairn events`): what happened to it,
// in order. The stream is of cairnd's current run.
type SandboxActivity struct {
	// Seq orders the events of one cairnd run (from 1, across sandboxes);
	// ?since=SEQ asks for those after it.
	Seq     int64     `json:"seq"`
	Time    time.Time `json:"time"`
	Sandbox string    `json:"sandbox"` // its id
	Type    string    `json:"type"`    // one of the Activity constants
	// State is the new state, of a state event.
	State string `json:"state,omitempty"`
	// What says more: a crash's reason, the process an OOM kill ended,
	// a checkpoint's trigger, a new sandbox's image.
	What string `json:"what,omitempty"`
	// Checkpoint is a checkpoint event's id in the sandbox ("v3").
	Checkpoint string `json:"checkpoint,omitempty"`
	// Fill is how far a lazy restore's fill is, of a fill event.
	Fill *Fill `json:"fill,omitempty"`
}

// SandboxActivity types.
const (
	ActivityCreated    = "created"
	ActivityState      = "state"      // its state changed (State)
	ActivityCrashed    = "crashed"    // it died; What says how
	ActivityOOMKill    = "oom_kill"   // its memory limit killed a process inside
	ActivityCheckpoint = "checkpoint" // a checkpoint was taken
	ActivityDeleted    = "deleted"    // the last event of its stream
	// ActivityFill: a lazy restore's fill went on (Fill, What): its
	// progress, its data unavailable or available again, its end.
	ActivityFill = "fill"
)

// Sandbox is an isolated Linux environment: an image, a writable layer and
// processes.
type Sandbox struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Host is the name of the host it runs on (its root is in that host's
	// pool; see docs/several-hosts.md).
	Host        string  `json:"host,omitempty"`
	Account     string  `json:"account"`
	Image       string  `json:"image"`
	State       string  `json:"state"`
	CPUs        float64 `json:"cpus,omitempty"`
	MemoryBytes int64   `json:"memory_bytes,omitempty"`
	// DiskBytes is the size of its disk, the image's files included: past
	// it, writes inside fail with EDQUOT ("Disk quota exceeded"); 0: no
	// size of its own (the pool's space is the bound).
	DiskBytes int64  `json:"disk_bytes,omitempty"`
	Parent    string `json:"parent,omitempty"`
	// Env, User and Workdir are the defaults of its execs and services
	// (after the image's; an exec's own win); Labels its tags.
	Env     []string          `json:"env,omitempty"`
	User    string            `json:"user,omitempty"`
	Workdir string            `json:"workdir,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	// TimeoutSeconds is the longest it runs at a time (0: no limit),
	// OnTimeout what happens then, and EndsAt when, while it runs.
	TimeoutSeconds int64      `json:"timeout_seconds,omitempty"`
	OnTimeout      string     `json:"on_timeout,omitempty"`
	EndsAt         *time.Time `json:"ends_at,omitempty"`
	// IdleSeconds is how long without use before it sleeps (0: never).
	IdleSeconds int64     `json:"idle_seconds,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	// AgentConnected says whether cairn-init inside is connected: a
	// connection that proved it holds the sandbox's agent key (see
	// docs/exec-protocol.md); only meaningful while running.
	AgentConnected bool `json:"agent_connected"`
	// Pid is the host pid of the runsc sandbox process while running.
	Pid int `json:"pid,omitempty"`
	// Container is the name of its runsc container while running: the
	// sandbox id, a dot and a generation (for runsc by hand: runsc --root
	// DATA-DIR/runsc ps CONTAINER).
	Container string `json:"container,omitempty"`
	// CurrentCheckpoint is the id of the checkpoint the disk was last
	// restored or forked from.
	CurrentCheckpoint string `json:"current_checkpoint,omitempty"`
	// SourceCheckpoint is "SANDBOX/ID" of the checkpoint this sandbox was
	// forked or restored-as-new from.
	SourceCheckpoint string `json:"source_checkpoint,omitempty"`
	// Disk is the space it uses; filled by info, not by list.
	Disk *DiskUsage `json:"disk,omitempty"`
	// AutoCheckpointSeconds is the interval of automatic checkpoints,
	// taken only when the disk changed since the last checkpoint.
	AutoCheckpointSeconds int64 `json:"auto_checkpoint_seconds"`
	// LastCheckpointAt is when its newest checkpoint (of any trigger) was taken.
	LastCheckpointAt *time.Time `json:"last_checkpoint_at,omitempty"`
	// LastOffsiteAt is when its newest checkpoint that both off-site
	// locations hold was taken; nil when none is.
	LastOffsiteAt *time.Time `json:"last_offsite_at,omitempty"`
	// OffsiteOff is true when off-site copies are disabled.
	OffsiteOff bool `json:"offsite_off,omitempty"`
	// Network is its network mode and rules (and, while it runs, the
	// network its container has).
	Network *Network `json:"network,omitempty"`
	// SavedSession is the id of the memory checkpoint the next start
	// resumes from (after `cairn stop --snapshot`); empty: the next start
	// boots.
	SavedSession string `json:"saved_session,omitempty"`
	// AutoCheckpointNote says why the last automatic checkpoint was skipped
	// (for instance the disk limit); empty when it was not.
	AutoCheckpointNote string `json:"auto_checkpoint_note,omitempty"`
	// Restart is its restart policy (one of the Restart… constants).
	Restart string `json:"restart,omitempty"`
	// LastCrash is why and when it last died; kept after it runs again.
	LastCrash *SandboxEvent `json:"last_crash,omitempty"`
	// LastOOMKill is the last process its memory limit killed inside it
	// ("pid 42 (python3), 380 MiB resident"), and when.
	LastOOMKill *SandboxEvent `json:"last_oom_kill,omitempty"`
	// Fill is how far the fill of a lazy restore is: present while the
	// sandbox's disk is still being fetched from off-site
	// (docs/lazy-restore.md).
	Fill *Fill `json:"fill,omitempty"`
	// Inside is what processes inside may create through /.cairn/api.sock.
	Inside InsideSettings `json:"inside"`
}

// Fill is the progress of a lazy restore: the bytes of file data in of
// those the checkpoint holds.
type Fill struct {
	Done  int64 `json:"done"`
	Total int64 `json:"total"`
	// Unavailable: the last fetch failed; reads of data not yet in fail
	// with EIO until the repository answers again (the fill retries).
	Unavailable bool `json:"unavailable,omitempty"`
}

// InsideSettings is what processes inside a sandbox may create through its
// management socket: set by the operator (cairn create, cairn config),
// never from inside. See docs/sandbox-api.md.
type InsideSettings struct {
	Memory bool `json:"memory"` // memory checkpoints
	Names  bool `json:"names"`  // named checkpoints (snapshots), which are never deleted automatically
	// CheckpointsPerMinute is how many checkpoints may be made from
	// inside in any minute; 0: none.
	CheckpointsPerMinute int `json:"checkpoints_per_minute"`
	// CheckpointsKept is how many unnamed checkpoints made from inside
	// are kept: beyond it the oldest are deleted; 0: all are kept.
	CheckpointsKept int `json:"checkpoints_kept"`
}

// InsideChange changes InsideSettings: fields left nil stay as they are
// (at create: take their defaults).
type InsideChange struct {
	Memory               *bool `json:"memory,omitempty"`
	Names                *bool `json:"names,omitempty"`
	CheckpointsPerMinute *int  `json:"checkpoints_per_minute,omitempty"`
	CheckpointsKept      *int  `json:"checkpoints_kept,omitempty"`
}

// AccountInfo answers GET /v1/account.
type AccountInfo struct {
	Name string `json:"name"`
	// DiskUsed is what the account's sandboxes and checkpoints take in the
	// pool, data shared between them counted once, images not counted.
	DiskUsed int64 `json:"disk_used"`
	// DiskLimit is the account's limit; 0 is unlimited.
	DiskLimit   int64 `json:"disk_limit"`
	Sandboxes   int   `json:"sandboxes"`
	Checkpoints int   `json:"checkpoints"`
	// Offsite counts the account's checkpoints by off-site state ("uploaded
	// ×2", "pending"…); absent when off-site copies are off.
	Offsite map[string]int `json:"offsite,omitempty"`
	// OffsiteLocations are the account's locations, by name.
	OffsiteLocations []string `json:"offsite_locations,omitempty"`
	// Pool is how full the host's pool is.
	Pool *PoolSpace `json:"pool,omitempty"`
}

// PoolSpace is how full the pool that holds every sandbox's disk and
// checkpoint is.
type PoolSpace struct {
	Size int64 `json:"size"` // the pool's file system
	// Used is what sandboxes, checkpoints and images take, shared data
	// counted once; Limit is how much of Size they may take; the rest,
	// Reserve, is kept for the metadata of checkpoints and deletes.
	Used    int64 `json:"used"`
	Limit   int64 `json:"limit,omitempty"`
	Reserve int64 `json:"reserve,omitempty"`
	Free    int64 `json:"free"` // what the file system has left
	// Low is true when the pool is past 90% of Limit, or its free space
	// is under half the reserve; Note says so in words.
	Low  bool   `json:"low,omitempty"`
	Note string `json:"note,omitempty"`
}

// CreateSandboxRequest is the body of POST /v1/sandboxes.
type CreateSandboxRequest struct {
	Name string `json:"name"`
	// Host is the name of the host to create it on (`cairn host list`);
	// "": the least loaded host that is up (see docs/several-hosts.md).
	Host   string  `json:"host,omitempty"`
	Image  string  `json:"image,omitempty"` // default "busybox"
	CPUs   float64 `json:"cpus,omitempty"`
	Memory string  `json:"memory,omitempty"` // e.g. "512M", "2G"; default: no limit beyond the host's
	// Disk is the size of its disk, e.g. "10G", the image's files included
	// (MinDiskBytes up to the pool's size); default: cairnd's
	// --default-disk.
	Disk string `json:"disk,omitempty"`
	// AutoCheckpoint is the interval of automatic checkpoints, e.g. "15m"
	// (60s-24h); default 5m.
	AutoCheckpoint string `json:"auto_checkpoint,omitempty"`
	// Inside is what processes inside may create (default: disk
	// checkpoints only, 10 a minute, the newest 20 kept).
	Inside *InsideChange `json:"inside,omitempty"`
	// Restart is the restart policy: "on-failure" (default), "always", "no".
	Restart string `json:"restart,omitempty"`
	// Network is its network mode and rules; default: mode egress, no
	// rules of its own (see docs/networking.md).
	Network *NetworkChange `json:"network,omitempty"`
	// Env (KEY=VALUE), User (user[:group] or uid[:gid]) and Workdir (an
	// absolute path) are the defaults of every exec and service, after
	// the image's; Labels are key=value tags (GET /v1/sandboxes?label=k=v).
	Env     []string          `json:"env,omitempty"`
	User    string            `json:"user,omitempty"`
	Workdir string            `json:"workdir,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	// Timeout is the longest it runs at a time, e.g. "2h" (1s-30d; from
	// each start; default none); OnTimeout what then happens: "stop"
	// (default), "delete" (with its final checkpoint) or "save" (its
	// session saved with memory, as cairn stop --snapshot).
	Timeout   string `json:"timeout,omitempty"`
	OnTimeout string `json:"on_timeout,omitempty"`
	// Idle puts it to sleep after that long without an exec, session or
	// port connection, e.g. "10m" (1s-720h; default never).
	Idle string `json:"idle,omitempty"`
}

// Network is a sandbox's network: its mode and rules (docs/networking.md).
type Network struct {
	// Mode is "egress" (outbound connections under the rules) or "none"
	// (loopback only).
	Mode string `json:"mode"`
	// Allow and Deny are IPv4 addresses, CIDRs and domain patterns
	// ("example.com", "*.example.com"). The most specific CIDR wins (deny
	// on a tie); addresses resolved for an allowed name are reachable
	// whatever the CIDRs say; private, link-local and other reserved
	// ranges are refused unless allowed.
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	// Active is the network the running container has: "egress" or
	// "none". It differs from Mode after a change from none to egress
	// until the sandbox boots again (a change to none blocks everything
	// at once).
	Active string `json:"active,omitempty"`
	// Address is the sandbox's IPv4 address inside, and Gateway its
	// gateway and DNS resolver; the same in every sandbox.
	Address string `json:"address,omitempty"`
	Gateway string `json:"gateway,omitempty"`
}

// NetworkChange changes a sandbox's network; nil fields stay as they
// are. A list given replaces the old one (an empty list clears it).
type NetworkChange struct {
	Mode  string    `json:"mode,omitempty"`
	Allow *[]string `json:"allow,omitempty"`
	Deny  *[]string `json:"deny,omitempty"`
}

// ConfigureSandboxRequest is the body of PATCH /v1/sandboxes/{name}; unset
// fields are left as they are.
type ConfigureSandboxRequest struct {
	AutoCheckpoint string         `json:"auto_checkpoint,omitempty"`
	Inside         *InsideChange  `json:"inside,omitempty"`
	Restart        string         `json:"restart,omitempty"`
	Network        *NetworkChange `json:"network,omitempty"`
	// Env sets variables (KEY=VALUE; a key it has is replaced in place),
	// UnsetEnv removes them by key; Labels sets labels, UnsetLabels
	// removes them. User and Workdir, when given, replace the defaults
	// ("" goes back to the image's). New execs see a change at once;
	// services at the sandbox's next start.
	Env         []string          `json:"env,omitempty"`
	UnsetEnv    []string          `json:"unset_env,omitempty"`
	User        *string           `json:"user,omitempty"`
	Workdir     *string           `json:"workdir,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	UnsetLabels []string          `json:"unset_labels,omitempty"`
	// Timeout sets the timeout and restarts it from now ("0": none);
	// OnTimeout what happens at it. Idle sets the idle time before sleep
	// ("0": never).
	Timeout   string `json:"timeout,omitempty"`
	OnTimeout string `json:"on_timeout,omitempty"`
	Idle      string `json:"idle,omitempty"`
}

// LabelFilter says whether labels match a filter of GET
// /v1/sandboxes?label=…: each filter "k=v" needs label k with value v,
// each "k" needs label k; all must match.
func LabelFilter(labels map[string]string, filters []string) bool {
	for _, f := range filters {
		k, v, withValue := strings.Cut(f, "=")
		got, ok := labels[k]
		if !ok || withValue && got != v {
			return false
		}
	}
	return true
}

// Image is a read-only root file system sandboxes start from.
type Image struct {
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Ready       bool      `json:"ready"` // built and usable; otherwise built on first use
	CreatedAt   time.Time `json:"created_at,omitzero"`
	// Of a pulled image: its manifest digest, the reference it was
	// pulled from, the bytes of its files and its config.
	Digest    string       `json:"digest,omitempty"`
	Source    string       `json:"source,omitempty"`
	SizeBytes int64        `json:"size_bytes,omitempty"`
	Config    *ImageConfig `json:"config,omitempty"`
}

// ImageConfig is the part of an image's OCI config cairn keeps: the
// defaults of its sandboxes' processes.
type ImageConfig struct {
	Env          []string `json:"env,omitempty"`
	Entrypoint   []string `json:"entrypoint,omitempty"`
	Cmd          []string `json:"cmd,omitempty"`
	WorkingDir   string   `json:"working_dir,omitempty"`
	User         string   `json:"user,omitempty"`
	ExposedPorts []int    `json:"exposed_ports,omitempty"`
}

// PruneImagesResult is what POST /v1/images/prune removed: the entries of
// the layer cache (the trees of layer chains kept by pulls).
type PruneImagesResult struct {
	Removed int `json:"removed"`
}

// PullImageRequest asks cairnd to pull an image from a registry
// (POST /v1/images/pull).
type PullImageRequest struct {
	Ref      string `json:"ref"`
	Name     string `json:"name,omitempty"`
	Insecure bool   `json:"insecure,omitempty"` // plain HTTP
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// BuildImageRequest is what POST /v1/images/build builds: its query
// (name, source, build_arg=K=V repeated, network, no_cache, insecure,
// memory, cpus, step_timeout); the request's body is the build context, a
// tar whose Dockerfile is at BuildContextDockerfile (docs/images.md#build).
type BuildImageRequest struct {
	Name      string            // the image to make (-t)
	Source    string            // the context's name, for the record
	BuildArgs map[string]string // --build-arg K=V
	Network   string            // RUN steps' network: "egress" (default) or "none"
	NoCache   bool              // run every step again
	Insecure  bool              // a FROM's registry may be plain HTTP
	// Each RUN step's bounds. Memory is a size ("512M", "4G"; "":
	// DefaultBuildMemoryBytes), CPUs a number of cores (0: the host's,
	// or cairnd's cap), StepTimeout a duration ("90s", "1h"; "":
	// DefaultBuildStepTimeout); each at most what cairnd allows.
	Memory      string
	CPUs        float64
	StepTimeout string
}

// BuildContextDockerfile is where the Dockerfile is in a build context's
// tar, whatever its name and place on the client (-f).
const BuildContextDockerfile = ".cairn-build/Dockerfile"

// Operation is long work started by a request. Its events are streamed by
// GET /v1/operations/{id}/events as NDJSON.
type Operation struct {
	ID        string     `json:"id"`
	Kind      string     `json:"kind"`     // e.g. "sandbox.create"
	Resource  string     `json:"resource"` // e.g. "sandbox/web"
	Status    string     `json:"status"`   // "running", "success", "failure"
	Error     *ErrorInfo `json:"error,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
}

// Operation statuses.
const (
	OpRunning = "running"
	OpSuccess = "success"
	OpFailure = "failure"
)

// Event is one NDJSON line of an operation's stream:
//
//	{"type":"progress","data":"Fetched 42.0 MiB of 100.0 MiB (8.0 MiB/s)","time":"…",
//	 "progress":{"phase":"fetch","done":44040192,"total":104857600,"unit":"bytes","rate":8388608}}
//
// Type is info, progress, error or complete. For error, Data is an
// ErrorInfo; for complete, Data is the operation's result (e.g. a Sandbox);
// otherwise a string for people.
type Event struct {
	Type string    `json:"type"`
	Data any       `json:"data,omitempty"`
	Time time.Time `json:"time"`
	// Progress is the machine-readable side of an info or progress
	// event; absent on events that carry only text (unstructured).
	Progress *Progress `json:"progress,omitempty"`
}

// Event types.
const (
	EventInfo     = "info"
	EventProgress = "progress"
	EventError    = "error"
	EventComplete = "complete"
)

// ServerInfo answers GET /v1.
type ServerInfo struct {
	Version string `json:"version"`
	Account string `json:"account"`
	Runtime string `json:"runtime"` // path of runsc in use
	Pool    string `json:"pool"`
	// Listen is the API's HTTPS address, and TLSFingerprint its
	// certificate's ("sha256:…", what clients pin); absent without
	// cairnd --listen.
	Listen         string `json:"listen,omitempty"`
	TLSFingerprint string `json:"tls_fingerprint,omitempty"`
}

// AccountRecord is an account as the accounts routes show it.
type AccountRecord struct {
	Name      string    `json:"name"`
	DiskLimit int64     `json:"disk_limit"` // bytes; 0: the host's default
	CreatedAt time.Time `json:"created_at"`
}

// CreateAccountRequest is the body of POST /v1/accounts.
type CreateAccountRequest struct {
	Name      string `json:"name"`
	DiskLimit string `json:"disk_limit,omitempty"` // a size, "100G"; "": the host's default
}

// SetAccountRequest is the body of PATCH /v1/accounts/{name}.
type SetAccountRequest struct {
	DiskLimit *string `json:"disk_limit,omitempty"` // a size; "0": the host's default
}

// AccountDeleted is the result of DELETE /v1/accounts/{name}?force=true:
// what the account held, deleted with it.
type AccountDeleted struct {
	Deleted     string `json:"deleted"`     // the account's name
	Sandboxes   int    `json:"sandboxes"`   // deleted by this run (stopped first)
	Checkpoints int    `json:"checkpoints"` // snapshots and those of deleted sandboxes included
	Tokens      int    `json:"tokens"`      // revoked, then deleted with the account
}

// Token is an API token, without its secret.
type Token struct {
	ID         string     `json:"id"` // public: lists and the audit log name it
	Account    string     `json:"account"`
	Name       string     `json:"name"`
	Role       string     `json:"role"`  // "admin", "member" or "read"
	State      string     `json:"state"` // "active", "expired" or "revoked"
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// NewToken is a token just made: the only answer that holds its secret.
type NewToken struct {
	Token string `json:"token"` // "cairn_<id>_<secret>": shown once, never stored
	Info  Token  `json:"info"`
}

// CreateTokenRequest is the body of POST /v1/tokens.
type CreateTokenRequest struct {
	Account string `json:"account,omitempty"` // default: the caller's
	Name    string `json:"name"`
	Role    string `json:"role,omitempty"`    // default "member"
	Expires string `json:"expires,omitempty"` // a duration, "30d", "12h"; "": never
}

// Whoami is who a request speaks for (GET /v1/whoami).
type Whoami struct {
	Account   string `json:"account"`
	Role      string `json:"role"`
	TokenID   string `json:"token_id,omitempty"`
	TokenName string `json:"token_name,omitempty"`
	Via       string `json:"via"` // "unix socket" or "https"
}

// AuditEntry is one change made through the API (GET /v1/audit).
type AuditEntry struct {
	ID        int64     `json:"id"`
	At        time.Time `json:"at"`
	Account   string    `json:"account,omitempty"`  // "" for the host's own (images, accounts)
	TokenID   string    `json:"token_id,omitempty"` // "" for the unix socket
	TokenName string    `json:"token_name,omitempty"`
	Remote    string    `json:"remote"`  // "unix" or IP:port
	Action    string    `json:"action"`  // "sandbox.create", "token.revoke"…
	Target    string    `json:"target"`  // "web", "web/v3"…
	Outcome   string    `json:"outcome"` // "ok", "accepted" (an operation started) or the error code
	Detail    string    `json:"detail,omitempty"`
}

// AuditQuery says which entries GET /v1/audit returns (?since=1h&target=web&limit=N).
type AuditQuery struct {
	Since  time.Time
	Target string
	Limit  int
}
