package server

import (
	"context"
	"io"
	"net"
	"net/http"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// The server's dependencies, one small interface per role. cairnd passes
// its sandbox.Manager for the roles that change sandboxes (Sandboxes,
// Rewinds, Processes), its catalog.Catalog for those that read them and
// delete checkpoints (SandboxViews, Checkpoints, Accounts, SandboxScope),
// its image.Catalog for Images, its portproxy.Service for Ports and its
// operation.Registry for Operations
// (the assertions are in package daemon); the handler tests pass a fake.
//
// Errors carry an API code (package errdefs) and are turned into an HTTP
// status and the JSON error shape by the server, once. An error without a
// code is answered as X01 (500) and logged. The codes named below are what
// the server expects; X01 may come from any method.
//
// A method returning an *operation.Op fails directly only for what it
// checks before the work starts (the codes listed); a failure of the work
// itself ends the operation with an error event instead.
//
// Every account and name is passed as the request gave it (the account as
// the server decided it); validating them is the implementation's job.

// Sandboxes is the lifecycle of the sandboxes of an account (the sandbox
// manager).
type Sandboxes interface {
	// Create validates req and starts an operation that makes and starts
	// the sandbox; it completes with the api.Sandbox. V01 (bad name), V02
	// (bad limits or interval), I01 (no such image), L04 (disk limit), S02
	// (name taken).
	Create(ctx context.Context, account string, req api.CreateSandboxRequest) (*operation.Op, error)
	// Start starts an operation that starts a stopped sandbox; it
	// completes with the api.Sandbox. S01, S03 (running), S05 (busy).
	Start(ctx context.Context, account, name string) (*operation.Op, error)
	// Stop starts an operation that stops a running sandbox (with
	// req.Snapshot: saves its session); it completes with the api.Sandbox.
	// S01, S04 (not running), S05.
	Stop(ctx context.Context, account, name string, req api.StopRequest) (*operation.Op, error)
	// Restart starts an operation that stops the sandbox if it runs and
	// starts it; it completes with the api.Sandbox. S01, S05.
	Restart(ctx context.Context, account, name string) (*operation.Op, error)
	// Delete starts an operation that stops and removes the sandbox. S01,
	// S05.
	Delete(ctx context.Context, account, name string) (*operation.Op, error)
	// Configure changes the sandbox's settings and returns it. S01, V02
	// (nothing to change, bad interval).
	Configure(ctx context.Context, account, name string, req api.ConfigureSandboxRequest) (api.Sandbox, error)
}

// Checkpoints are an account's checkpoints as users see them: those of a
// sandbox, those named or kept account-wide (snapshots), what changed
// between two, and their deletion (the catalog).
type Checkpoints interface {
	// Snapshots lists the account's named and automatic checkpoints,
	// oldest first, never nil.
	Snapshots(ctx context.Context, account string) ([]api.Checkpoint, error)
	// DeleteSnapshot deletes the checkpoint ref and returns what it was.
	// K08, K03.
	DeleteSnapshot(ctx context.Context, account, ref string) (api.Checkpoint, error)
	// Checkpoints lists the sandbox's checkpoints, oldest first, never nil;
	// automatic ones only with includeAuto. S01.
	Checkpoints(ctx context.Context, account, name string, includeAuto bool) ([]api.Checkpoint, error)
	// Checkpoint returns one checkpoint of the sandbox. S01, K08.
	Checkpoint(ctx context.Context, account, name, ref string) (api.Checkpoint, error)
	// DeleteCheckpoint deletes a checkpoint and frees its space before it
	// returns. S01, K08, K03 (a sandbox's current checkpoint).
	DeleteCheckpoint(ctx context.Context, account, name, ref string) error
	// KeepCheckpoint makes a checkpoint made from inside the sandbox one
	// the operator keeps (no longer counted toward nor deleted for its
	// --inside-keep) and returns it; for any other checkpoint it changes
	// nothing and returns it. S01, K08.
	KeepCheckpoint(ctx context.Context, account, name, ref string) (api.Checkpoint, error)
	// EvictCheckpoint drops a checkpoint's local copy: only one both
	// off-site locations hold (R02 otherwise), never a current one (K03).
	EvictCheckpoint(ctx context.Context, account, name, ref string) (api.Checkpoint, error)
	// Diff lists what differs between checkpoint from and checkpoint to
	// (or the current disk when to is ""), never nil. S01, V02 (no from),
	// K08.
	Diff(ctx context.Context, account, name, from, to string) ([]api.DiffEntry, error)
	// DiffFile returns the text diff of one file between the same two
	// states. V02 (a bad path), F01 (in neither), S01, K08.
	DiffFile(ctx context.Context, account, name, from, to, path string) (api.FileDiff, error)
}

// SandboxViews shows the sandboxes of an account (the catalog).
type SandboxViews interface {
	// Get returns the sandbox called name, without its disk usage. S01.
	Get(ctx context.Context, account, name string) (api.Sandbox, error)
	// Info returns the sandbox called name with its disk usage. S01.
	Info(ctx context.Context, account, name string) (api.Sandbox, error)
	// List returns the account's sandboxes by name, never nil; with a
	// parent, only those forked from the sandbox of that name. S01 (no
	// such parent).
	List(ctx context.Context, account, parent string) ([]api.Sandbox, error)
}

// Rewinds are the operations that take checkpoints and bring them back:
// in place, as new sandboxes, or as forks (the sandbox manager).
type Rewinds interface {
	// CreateCheckpoint starts an operation that checkpoints the sandbox; it
	// completes with the api.Checkpoint. S01, V01 (bad snapshot name), K02
	// (snapshot name taken).
	CreateCheckpoint(ctx context.Context, account, name string, req api.CreateCheckpointRequest) (*operation.Op, error)
	// Restore starts an operation that restores the checkpoint in place,
	// or as a new sandbox with req.As; it completes with the api.Sandbox.
	// S01, S05, K08, K04 (memory image bad), R01/R02 (off-site), and with
	// req.As: V01, S02, L04.
	Restore(ctx context.Context, account, name, ref string, req api.RestoreRequest) (*operation.Op, error)
	// RestoreFromInside is Restore in place asked for by a process inside
	// the sandbox: the work starts after a grace period in which the
	// caller gets its answer. Its ctx is not cancelled when the caller
	// goes away. The codes of Restore; V02 with req.As.
	RestoreFromInside(ctx context.Context, account, name, ref string, req api.RestoreRequest) (*operation.Op, error)
	// CreateCheckpointFromInside is CreateCheckpoint asked for by a
	// process inside the sandbox, under what the sandbox's settings
	// (api.InsideSettings) allow: V02 for a memory checkpoint or a name
	// they do not allow, L06 past their rate; the checkpoint is marked as
	// made from inside. The codes of CreateCheckpoint too.
	CreateCheckpointFromInside(ctx context.Context, account, name string, req api.CreateCheckpointRequest) (*operation.Op, error)
	// Fork starts an operation that makes req.Count running copies of the
	// sandbox; it completes with the children. S01, S04 (memory of a
	// stopped sandbox), S05, V01, V02, K08, K05 (no memory), K09 (local
	// copy gone), K04, L04, S02.
	Fork(ctx context.Context, account, name string, req api.ForkRequest) (*operation.Op, error)
	// CreateSnapshot is CreateCheckpoint with a name (a default one if
	// req.Name is ""). Its codes.
	CreateSnapshot(ctx context.Context, account, name string, req api.CreateCheckpointRequest) (*operation.Op, error)
	// RestoreSnapshot starts an operation that restores ref as the new
	// sandbox req.Name; it completes with the api.Sandbox. K08, V01, S02,
	// K04, R01/R02, L04.
	RestoreSnapshot(ctx context.Context, account, ref string, req api.SnapshotRestoreRequest) (*operation.Op, error)
}

// Processes is what runs inside a running sandbox, through its cairn-init.
// While the sandbox is starting (or otherwise busy) each method waits
// until it is ready.
type Processes interface {
	// Exec starts req.Command in the sandbox and returns its pid. For a
	// detached command stream is nil; otherwise it carries the exec frames
	// of package api until the Exit frame, and the caller closes it. V02
	// (no command), S01, S04, S07 (cairn-init unreachable), S08 (the
	// command could not be started).
	Exec(ctx context.Context, account, name string, req api.ExecRequest) (pid int, stream io.ReadWriteCloser, err error)
	// Services lists the services defined in the sandbox with their
	// states (nil if none). S01, S04, S07.
	Services(ctx context.Context, account, name string) ([]api.ServiceStatus, error)
	// ServiceLogs returns the last tail bytes of a service's log (0: the
	// default amount). S01, S04, S07, S09 (no such service), V02.
	ServiceLogs(ctx context.Context, account, name, service string, tail int) ([]byte, error)

	// Processes lists the sandbox's background processes (running, or
	// exited and kept), then its attached execs that run. S01, S04, S07.
	Processes(ctx context.Context, account, name string) ([]api.Process, error)
	// Process describes the process pid. S12 (no such process).
	Process(ctx context.Context, account, name string, pid int) (api.Process, error)
	// SignalProcess sends signal number sig to the process group of pid.
	// S12, S13 (it has exited).
	SignalProcess(ctx context.Context, account, name string, pid, sig int) error
	// WriteStdin writes data to the stdin of background process pid, and
	// closes it after if closeAfter. S12, S13, S14 (an attached exec),
	// S15 (stdin closed), S16 (the process does not read it).
	WriteStdin(ctx context.Context, account, name string, pid int, data []byte, closeAfter bool) error
	// WaitProcess waits until background process pid has exited and
	// returns it with its status. S12, S14.
	WaitProcess(ctx context.Context, account, name string, pid int) (api.Process, error)
	// AttachProcess returns background process pid and a stream of exec
	// frames: its output from offset on, then its Exit frame; Stdin,
	// StdinClose and Signal frames written to it reach the process. The
	// caller closes it; the process runs on. S12, S14, V02 (offset past
	// the end of the output).
	AttachProcess(ctx context.Context, account, name string, pid int, offset int64) (api.Process, io.ReadWriteCloser, error)
}

// Files gives the file system of a running sandbox (the sandbox manager).
type Files interface {
	// FS returns the file system of the running sandbox called name,
	// waiting while it starts. S01, S04, S07.
	FS(ctx context.Context, account, name string) (FS, error)
}

// FS is one running sandbox's file system as the sandbox sees it: its
// cairn-init does the work inside, so every path is resolved in the
// sandbox's mount namespace (package agent's Host). Paths are absolute
// (V02 otherwise). Each method may also fail with S07 (cairn-init gone)
// and V02 (a bad path, mode or owner); see api/files.go for the rest.
type FS interface {
	// Stat returns the entry of path, a link being itself. F01.
	Stat(ctx context.Context, path string) (api.FileEntry, error)
	// List calls fn with the entries under the directory path, depth
	// levels deep, each directory's by name, its own right after it.
	// F01, F03, L09.
	List(ctx context.Context, path string, depth int, fn func(api.FileEntry) error) error
	// Read returns the entry and content of the file at path (links
	// followed); the caller closes it. Its reads end with io.EOF or F09,
	// S07. F01, F04.
	Read(ctx context.Context, path string) (api.FileEntry, io.ReadCloser, error)
	// Write replaces req.Path with what body reads, once all of it is
	// there (req.Mode, req.Owner, req.Parents). A failure of body is an
	// *agent.BodyError. F03, F04, F06, F07.
	Write(ctx context.Context, req api.FileRequest, body io.Reader) (api.FileEntry, error)
	// MakeDir makes req.Path and reports whether it did (req.Parents: an
	// existing directory is no error). F02, F03.
	MakeDir(ctx context.Context, req api.FileRequest) (api.FileEntry, bool, error)
	// Remove removes path (recursive: with what it holds). F01, F05.
	Remove(ctx context.Context, path string, recursive bool) error
	// Rename renames from to to and returns the entry at to. F01, F02, F05.
	Rename(ctx context.Context, from, to string) (api.FileEntry, error)
	// TarOut returns path as a tar stream; the caller closes it. F01.
	TarOut(ctx context.Context, path string) (api.FileEntry, io.ReadCloser, error)
	// TarIn extracts the tar stream body reads into the directory
	// req.Path. F01, F03, F07, F08, L09; *agent.BodyError.
	TarIn(ctx context.Context, req api.FileRequest, body io.Reader) (api.TarResult, error)
	// Watch calls ready once the watch is set, then fn with each event
	// under the directory path until ctx ends (nil) or it fails. F01,
	// F03, L08, L09.
	Watch(ctx context.Context, path string, recursive bool, ready func(), fn func(api.FileEvent) error) error
}

// Accounts is what concerns an account as a whole.
type Accounts interface {
	// Account returns the account's disk use and counts.
	Account(ctx context.Context, account string) (api.AccountInfo, error)
	// Verify starts an operation that checks the account's checkpoints,
	// locally or off-site; it completes with an api.VerifyReport. V02
	// (a location without off-site), R01 (off-site disabled).
	Verify(ctx context.Context, account string, req api.VerifyRequest) (*operation.Op, error)
	// OffsiteCheckpoints lists what the account's off-site repository
	// holds (R01 when off-site copies are off or it cannot be opened).
	OffsiteCheckpoints(ctx context.Context, account string) ([]api.RemoteCheckpoint, error)
	// ImportOffsite makes checkpoints here for what the repository holds
	// and this host does not know. V02 (neither all nor manifests, or
	// both), R01, R02 (a manifest it does not hold).
	ImportOffsite(ctx context.Context, account string, req api.ImportRequest) (api.ImportResult, error)
}

// Images is the catalog of images sandboxes are made from.
type Images interface {
	// List returns the known images, built or not, by name.
	List() ([]api.Image, error)
	// Info returns the image called name. I01.
	Info(ctx context.Context, name string) (api.Image, error)
	// Delete deletes the image called name. I01, I08 (in use).
	Delete(ctx context.Context, name string) error
	// Pull starts pulling req.Ref from its registry; the operation's
	// result is the api.Image. Its errors: V02, I03-I07, L07.
	Pull(ctx context.Context, req api.PullImageRequest) (*operation.Op, error)
	// Import reads an image archive (docker save or OCI layout tar, or a
	// gzip of either) from body and starts making it the image name;
	// source is the archive's file name. V02, I03, I06, I07, L07.
	Import(ctx context.Context, body io.Reader, name, source string) (*operation.Op, error)
	// Build reads a build context (a tar whose Dockerfile is at
	// api.BuildContextDockerfile) from body and starts building the
	// image req.Name from it, each RUN step within req's bounds (at most
	// cairnd's caps). V02, I09, I13, I14 (the context), L07; the
	// operation's: I01-I12, L07.
	Build(ctx context.Context, body io.Reader, req api.BuildImageRequest) (*operation.Op, error)
	// PruneCache deletes every entry of the layer cache; images and
	// sandboxes lose nothing.
	PruneCache(ctx context.Context) (api.PruneImagesResult, error)
}

// Operations holds the long work in progress and recently finished.
type Operations interface {
	// Get returns the operation with id. O01.
	Get(id string) (*operation.Op, error)
	// List returns every known operation, newest first, never nil.
	List() []api.Operation
}

// SandboxScope tells who a sandbox is, for its management socket, which
// knows the sandbox by id only.
type SandboxScope interface {
	// Whoami returns the account and current name of sandbox id. S01 if it
	// no longer exists.
	Whoami(ctx context.Context, id string) (account, name string, err error)
}

// Ports are the published ports of an account's sandboxes, its port
// token, and raw TCP connections to a port inside (the port proxy's
// service). port is as the request gave it: checking its range (V02) is
// the implementation's job.
type Ports interface {
	// Ports lists the sandbox's published ports by number, never nil.
	// S01.
	Ports(ctx context.Context, account, name string) ([]api.Port, error)
	// Publish publishes req.Port of the sandbox, or sets whether it is
	// public if it is published already, and returns it. S01, V02.
	Publish(ctx context.Context, account, name string, req api.PublishPortRequest) (api.Port, error)
	// Unpublish unpublishes the port. S01, V02, P01 (not published).
	Unpublish(ctx context.Context, account, name string, port int) error
	// Token returns the account's port token, made on first need; with
	// rotate, a new one replaces it at once.
	Token(ctx context.Context, account string, rotate bool) (api.PortToken, error)
	// Connect opens a TCP connection to the port inside the sandbox,
	// published or not; the caller closes it. S01, V02, P03 (not
	// running), P04 (nothing answered).
	Connect(ctx context.Context, account, name string, port int) (net.Conn, error)
}

// Deps are the parts a Server serves. Every field must be set but
// Requests and Fingerprint.
type Deps struct {
	Sandboxes   Sandboxes
	Views       SandboxViews
	Checkpoints Checkpoints
	Rewinds     Rewinds
	Processes   Processes
	Files       Files
	Accounts    Accounts
	Access      Access
	Audit       Auditor
	Images      Images
	Operations  Operations
	Scope       SandboxScope
	Ports       Ports
	Activity    Activity
	// Requests is told about every request answered; nil: nobody.
	Requests RequestObserver
	// Fingerprint is the fingerprint of the certificate the TCP
	// listener serves now (GET /v1 answers it in tls_fingerprint); nil:
	// the ServerInfo's, as given.
	Fingerprint func() string
	// Hosts are the hosts that share the metadata (hosts.Forwarder): a
	// request for a sandbox of another host is forwarded to it. nil: one
	// host, and GET /v1/hosts answers none.
	Hosts Hosts
	// Evacuations restore the sandboxes of a host that is down on the
	// others (evacuate.Evacuator); nil: POST /v1/hosts/{name}/evacuate
	// answers H01 (one host).
	Evacuations Evacuations
}

// Evacuations are evacuations of hosts that are down (evacuate.Evacuator).
type Evacuations interface {
	// Evacuate starts the evacuation of the host called name: H01 for
	// none, H03 when it is up; its result is an api.EvacuationReport.
	Evacuate(ctx context.Context, name string, req api.EvacuateRequest) (*operation.Op, error)
}

// Hosts is where requests go among the hosts (hosts.Forwarder).
type Hosts interface {
	// SandboxHost returns the id of the host that runs the account's
	// sandbox called name when it is another one; "" when it is this
	// host, or there is no such sandbox.
	SandboxHost(ctx context.Context, account, name string) (string, error)
	// Place chooses the host of a new sandbox of image: the host named
	// want, or the least loaded one; "" is this host. H01 for no host of
	// that name, H02 for one that is down.
	Place(ctx context.Context, want, image string) (string, error)
	// Forward serves r on the host with that id, for caller
	// (api.CallerToken, api.CallerSocket); fail answers an error that
	// came before the host answered.
	Forward(w http.ResponseWriter, r *http.Request, hostID, caller string, fail func(error))
	// VerifyPeer checks a forwarded request's api.PeerHeader and returns
	// the name of the host that sent it.
	VerifyPeer(ctx context.Context, proof string) (string, error)
	// List returns every host with its state and load.
	List(ctx context.Context) ([]api.Host, error)
	// OperationHost returns the host of an operation another host
	// started for a request this one forwarded; "" otherwise.
	OperationHost(id string) string
}
