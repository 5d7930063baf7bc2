package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/activity"
	"github.com/cairn-sandbox/cairn/internal/auth"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// call is one call the server made to the fake: the method, the account
// it acted for (the id, for Whoami) and the other arguments but ctx.
type call struct {
	Method  string
	Account string
	Args    []any
}

// fake implements every role of Deps. It records each call, answers err
// if set, and otherwise canned values; its operations are real ones of a
// real operation.Registry, emitting the events of work.
type fake struct {
	ops *operation.Registry
	hub *activity.Hub // the sandboxes' event streams; Get's sandboxes have id ""

	mu    sync.Mutex
	calls []call

	err error // returned by every method but Whoami and Operations.List

	// work is what each operation started by the fake does; by default
	// it reports one progress event and completes with "done".
	work operation.Func

	// whoAccount, whoName are Whoami's answer; whoErr its error.
	whoAccount, whoName string
	whoErr              error

	services []api.ServiceStatus // Services' answer
	stream   *fakeStream         // Exec's stream of an attached command
	// execStream, if set, is Exec's stream instead of stream.
	execStream io.ReadWriteCloser
	// connectTo is the address Connect dials (a test's loopback server).
	connectTo string
	audit     fakeAudit // the audit log
}

var (
	_ Sandboxes    = (*fake)(nil)
	_ Checkpoints  = (*fake)(nil)
	_ SandboxViews = (*fake)(nil)
	_ Rewinds      = (*fake)(nil)
	_ Processes    = (*fake)(nil)
	_ Files        = (*fake)(nil)
	_ Accounts     = (*fake)(nil)
	_ Images       = fakeImages{}
	_ Operations   = fakeOps{}
	_ SandboxScope = (*fake)(nil)
	_ Ports        = (*fake)(nil)
	_ Hosts        = fakeHosts{}
	_ Evacuations  = fakeHosts{}
)

func newFake(t *testing.T) *fake {
	return &fake{ops: operation.NewRegistry(t.Context(), time.Now), hub: activity.NewHub(nil), whoAccount: "acct-x", whoName: "inside"}
}

// server returns a Server over f.
func (f *fake) server() *Server {
	return New(Deps{
		Sandboxes: f, Views: f, Checkpoints: f, Rewinds: f, Processes: f, Files: f, Accounts: f, Access: fakeAccess{f}, Audit: &f.audit,
		Images: fakeImages{f}, Operations: fakeOps{f}, Scope: f, Ports: f, Activity: f.hub, Hosts: fakeHosts{f}, Evacuations: fakeHosts{f},
	}, api.ServerInfo{Version: "test"})
}

// fakeHosts is one host: every sandbox is its own (SandboxHost and Place
// answer "", unrecorded, as on one host); List is recorded.
type fakeHosts struct{ f *fake }

func (h fakeHosts) SandboxHost(context.Context, string, string) (string, error) { return "", nil }
func (h fakeHosts) Place(context.Context, string, string) (string, error)       { return "", nil }
func (h fakeHosts) VerifyPeer(context.Context, string) (string, error) {
	return "", errdefs.New(api.CodeUnauthenticated, "no peers")
}
func (h fakeHosts) Forward(w http.ResponseWriter, _ *http.Request, host, caller string, _ func(error)) {
	h.f.record("Hosts.Forward", "", host, caller)
	w.WriteHeader(http.StatusTeapot)
}
func (h fakeHosts) OperationHost(string) string { return "" }
func (h fakeHosts) Evacuate(_ context.Context, name string, req api.EvacuateRequest) (*operation.Op, error) {
	return h.f.op("Hosts.Evacuate", "", name, req)
}
func (h fakeHosts) List(context.Context) ([]api.Host, error) {
	h.f.record("Hosts.List", "")
	return []api.Host{{Name: "one", ID: "h1", State: api.HostUp, This: true}}, h.f.err
}

func (f *fake) record(method, account string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call{method, account, args})
}

// takeCalls returns the calls so far and forgets them.
func (f *fake) takeCalls() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

// op records the call and, unless f.err, starts an operation.
func (f *fake) op(method, account string, args ...any) (*operation.Op, error) {
	f.record(method, account, args...)
	if f.err != nil {
		return nil, f.err
	}
	work := f.work
	if work == nil {
		work = func(ctx context.Context, op *operation.Op) (any, error) {
			op.Progress("working on %s", method)
			return "done", nil
		}
	}
	return f.ops.Start("fake."+method, "fake", work), nil
}

func (f *fake) Create(_ context.Context, account string, req api.CreateSandboxRequest) (*operation.Op, error) {
	return f.op("Create", account, req)
}

func (f *fake) Get(_ context.Context, account, name string) (api.Sandbox, error) {
	f.record("Get", account, name)
	return api.Sandbox{Name: name, Account: account}, f.err
}

func (f *fake) Info(_ context.Context, account, name string) (api.Sandbox, error) {
	f.record("Info", account, name)
	return api.Sandbox{Name: name, Account: account}, f.err
}

func (f *fake) List(_ context.Context, account, parent string) ([]api.Sandbox, error) {
	f.record("List", account, parent)
	return []api.Sandbox{}, f.err
}

func (f *fake) Start(_ context.Context, account, name string) (*operation.Op, error) {
	return f.op("Start", account, name)
}

func (f *fake) Stop(_ context.Context, account, name string, req api.StopRequest) (*operation.Op, error) {
	return f.op("Stop", account, name, req)
}

func (f *fake) Restart(_ context.Context, account, name string) (*operation.Op, error) {
	return f.op("Restart", account, name)
}

func (f *fake) Delete(_ context.Context, account, name string) (*operation.Op, error) {
	return f.op("Delete", account, name)
}

func (f *fake) Configure(_ context.Context, account, name string, req api.ConfigureSandboxRequest) (api.Sandbox, error) {
	f.record("Configure", account, name, req)
	return api.Sandbox{Name: name}, f.err
}

func (f *fake) CreateCheckpoint(_ context.Context, account, name string, req api.CreateCheckpointRequest) (*operation.Op, error) {
	return f.op("CreateCheckpoint", account, name, req)
}

func (f *fake) CreateCheckpointFromInside(_ context.Context, account, name string, req api.CreateCheckpointRequest) (*operation.Op, error) {
	return f.op("CreateCheckpointFromInside", account, name, req)
}

func (f *fake) Checkpoints(_ context.Context, account, name string, includeAuto bool) ([]api.Checkpoint, error) {
	f.record("Checkpoints", account, name, includeAuto)
	return []api.Checkpoint{}, f.err
}

func (f *fake) Checkpoint(_ context.Context, account, name, ref string) (api.Checkpoint, error) {
	f.record("Checkpoint", account, name, ref)
	return api.Checkpoint{}, f.err
}

func (f *fake) DeleteCheckpoint(_ context.Context, account, name, ref string) error {
	f.record("DeleteCheckpoint", account, name, ref)
	return f.err
}

func (f *fake) KeepCheckpoint(_ context.Context, account, name, ref string) (api.Checkpoint, error) {
	f.record("KeepCheckpoint", account, name, ref)
	return api.Checkpoint{ID: ref, Sandbox: name}, f.err
}

func (f *fake) EvictCheckpoint(_ context.Context, account, name, ref string) (api.Checkpoint, error) {
	f.record("EvictCheckpoint", account, name, ref)
	return api.Checkpoint{ID: ref, Sandbox: name, Stored: api.StoredOffsiteOnly}, f.err
}

func (f *fake) Restore(_ context.Context, account, name, ref string, req api.RestoreRequest) (*operation.Op, error) {
	return f.op("Restore", account, name, ref, req)
}

func (f *fake) RestoreFromInside(ctx context.Context, account, name, ref string, req api.RestoreRequest) (*operation.Op, error) {
	// The restore ends the caller: it must not end with the request.
	if ctx.Done() != nil {
		f.record("RestoreFromInside", account, name, ref, req)
		return nil, errdefs.New(api.CodeInternal, "RestoreFromInside was given a context that ends with the request")
	}
	return f.op("RestoreFromInside", account, name, ref, req)
}

func (f *fake) Fork(_ context.Context, account, name string, req api.ForkRequest) (*operation.Op, error) {
	return f.op("Fork", account, name, req)
}

func (f *fake) DiffFile(_ context.Context, account, name, from, to, path string) (api.FileDiff, error) {
	f.record("DiffFile", account, name, from, to, path)
	return api.FileDiff{Path: path}, f.err
}

func (f *fake) Diff(_ context.Context, account, name, from, to string) ([]api.DiffEntry, error) {
	f.record("Diff", account, name, from, to)
	return []api.DiffEntry{}, f.err
}

func (f *fake) CreateSnapshot(_ context.Context, account, name string, req api.CreateCheckpointRequest) (*operation.Op, error) {
	return f.op("CreateSnapshot", account, name, req)
}

func (f *fake) Snapshots(_ context.Context, account string) ([]api.Checkpoint, error) {
	f.record("Snapshots", account)
	return []api.Checkpoint{}, f.err
}

func (f *fake) DeleteSnapshot(_ context.Context, account, ref string) (api.Checkpoint, error) {
	f.record("DeleteSnapshot", account, ref)
	return api.Checkpoint{}, f.err
}

func (f *fake) RestoreSnapshot(_ context.Context, account, ref string, req api.SnapshotRestoreRequest) (*operation.Op, error) {
	return f.op("RestoreSnapshot", account, ref, req)
}

func (f *fake) Exec(_ context.Context, account, name string, req api.ExecRequest) (int, io.ReadWriteCloser, error) {
	f.record("Exec", account, name, req)
	if f.err != nil {
		return 0, nil, f.err
	}
	if req.Detach {
		return 42, nil, nil
	}
	if f.execStream != nil {
		return 42, f.execStream, nil
	}
	return 42, f.stream, nil
}

func (f *fake) Services(_ context.Context, account, name string) ([]api.ServiceStatus, error) {
	f.record("Services", account, name)
	return f.services, f.err
}

func (f *fake) ServiceLogs(_ context.Context, account, name, service string, tail int) ([]byte, error) {
	f.record("ServiceLogs", account, name, service, tail)
	return []byte("log of " + service), f.err
}

// fakeProcess is what the fake's process methods answer.
var fakeProcess = api.Process{PID: 42, Command: []string{"sleep", "9"}, State: api.ProcessRunning, Background: true}

func (f *fake) Processes(_ context.Context, account, name string) ([]api.Process, error) {
	f.record("Processes", account, name)
	return []api.Process{fakeProcess}, f.err
}

func (f *fake) Process(_ context.Context, account, name string, pid int) (api.Process, error) {
	f.record("Process", account, name, pid)
	return fakeProcess, f.err
}

func (f *fake) SignalProcess(_ context.Context, account, name string, pid, sig int) error {
	f.record("SignalProcess", account, name, pid, sig)
	return f.err
}

func (f *fake) WriteStdin(_ context.Context, account, name string, pid int, data []byte, closeAfter bool) error {
	f.record("WriteStdin", account, name, pid, string(data), closeAfter)
	return f.err
}

func (f *fake) WaitProcess(_ context.Context, account, name string, pid int) (api.Process, error) {
	f.record("WaitProcess", account, name, pid)
	p := fakeProcess
	p.State, p.Exit = api.ProcessExited, &api.ExitStatus{Code: 3}
	return p, f.err
}

func (f *fake) AttachProcess(_ context.Context, account, name string, pid int, offset int64) (api.Process, io.ReadWriteCloser, error) {
	f.record("AttachProcess", account, name, pid, offset)
	if f.err != nil {
		return api.Process{}, nil, f.err
	}
	return fakeProcess, f.stream, nil
}

func (f *fake) Account(_ context.Context, account string) (api.AccountInfo, error) {
	f.record("Account", account)
	return api.AccountInfo{Name: account}, f.err
}

func (f *fake) OffsiteCheckpoints(_ context.Context, account string) ([]api.RemoteCheckpoint, error) {
	f.record("OffsiteCheckpoints", account)
	return []api.RemoteCheckpoint{{Manifest: "m1", Sandbox: "web", ID: "v3"}}, f.err
}

func (f *fake) ImportOffsite(_ context.Context, account string, req api.ImportRequest) (api.ImportResult, error) {
	f.record("ImportOffsite", account, req)
	return api.ImportResult{Imported: []api.Checkpoint{{ID: "v3", Sandbox: "web"}}, Skipped: []api.ImportSkipped{}}, f.err
}

func (f *fake) Verify(_ context.Context, account string, req api.VerifyRequest) (*operation.Op, error) {
	return f.op("Verify", account, req)
}

func (f *fake) Whoami(_ context.Context, id string) (string, string, error) {
	f.record("Whoami", id)
	return f.whoAccount, f.whoName, f.whoErr
}

// fakeImages is the fake's Images (its List would clash with Sandboxes').
type fakeImages struct{ *fake }

func (f fakeImages) List() ([]api.Image, error) {
	f.record("Images.List", "")
	return []api.Image{{Name: "busybox"}}, f.err
}

func (f fakeImages) Info(_ context.Context, name string) (api.Image, error) {
	f.record("Images.Info", "", name)
	return api.Image{Name: name}, f.err
}

func (f fakeImages) Delete(_ context.Context, name string) error {
	f.record("Images.Delete", "", name)
	return f.err
}

func (f fakeImages) Import(_ context.Context, body io.Reader, name, source string) (*operation.Op, error) {
	b, _ := io.ReadAll(body)
	return f.op("Images.Import", "", string(b), name, source)
}

func (f fakeImages) Build(_ context.Context, body io.Reader, req api.BuildImageRequest) (*operation.Op, error) {
	b, _ := io.ReadAll(body)
	return f.op("Images.Build", "", string(b), req)
}

func (f fakeImages) Pull(_ context.Context, req api.PullImageRequest) (*operation.Op, error) {
	return f.op("Images.Pull", "", req)
}

func (f fakeImages) PruneCache(context.Context) (api.PruneImagesResult, error) {
	f.record("Images.PruneCache", "")
	return api.PruneImagesResult{Removed: 3}, f.err
}

// fakeOps is the fake's Operations: its real registry, failing with err
// if set.
type fakeOps struct{ *fake }

func (f fakeOps) Get(id string) (*operation.Op, error) {
	f.record("Operations.Get", "", id)
	if f.err != nil {
		return nil, f.err
	}
	return f.ops.Get(id)
}

func (f fakeOps) List() []api.Operation {
	f.record("Operations.List", "")
	return f.ops.List()
}

// fakeStream is the stream of an attached exec, a process that answers
// out once it has read wantIn (so the test knows the input arrived).
type fakeStream struct {
	out    io.Reader
	wantIn int
	got    chan struct{} // closed once wantIn bytes came in, or at Close

	mu     sync.Mutex
	in     bytes.Buffer
	closed bool
}

func newFakeStream(out, wantIn string) *fakeStream {
	return &fakeStream{out: strings.NewReader(out), wantIn: len(wantIn), got: make(chan struct{})}
}

func (s *fakeStream) Read(p []byte) (int, error) {
	<-s.got
	return s.out.Read(p)
}

func (s *fakeStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.in.Write(p)
	if s.in.Len() >= s.wantIn {
		s.closeGot()
	}
	return n, err
}

func (s *fakeStream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		s.closeGot()
	}
	return nil
}

// closeGot closes got once. s.mu is held.
func (s *fakeStream) closeGot() {
	select {
	case <-s.got:
	default:
		close(s.got)
	}
}

func (s *fakeStream) input() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.in.String()
}

func (s *fakeStream) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func errorV02(msg string) error { return errdefs.New(api.CodeInvalidArgument, "%s", msg) }
func errorL06(msg string) error { return errdefs.New(api.CodeInsideQuota, "%s", msg) }

// fakeAccess is the fake's Access role.
type fakeAccess struct{ *fake }

var _ Access = fakeAccess{}

func (f fakeAccess) CreateAccount(_ context.Context, name string, diskLimit int64) (api.AccountRecord, error) {
	f.record("Access.CreateAccount", "", name, diskLimit)
	return api.AccountRecord{Name: name, DiskLimit: diskLimit}, f.err
}

func (f fakeAccess) Accounts(context.Context) ([]api.AccountRecord, error) {
	f.record("Access.Accounts", "")
	return []api.AccountRecord{{Name: "default"}}, f.err
}

func (f fakeAccess) SetDiskLimit(_ context.Context, name string, bytes int64) (api.AccountRecord, error) {
	f.record("Access.SetDiskLimit", "", name, bytes)
	return api.AccountRecord{Name: name, DiskLimit: bytes}, f.err
}

func (f fakeAccess) DeleteAccount(_ context.Context, name string) error {
	f.record("Access.DeleteAccount", "", name)
	return f.err
}

func (f fakeAccess) PurgeAccount(_ context.Context, name string) (*operation.Op, error) {
	return f.op("Access.PurgeAccount", "", name)
}

func (f fakeAccess) CreateToken(_ context.Context, account, name string, role auth.Role, ttl time.Duration) (api.NewToken, error) {
	f.record("Access.CreateToken", "", account, name, role, ttl)
	return api.NewToken{Token: "cairn_x", Info: api.Token{Name: name}}, f.err
}

func (f fakeAccess) Tokens(_ context.Context, account string) ([]api.Token, error) {
	f.record("Access.Tokens", "", account)
	return []api.Token{}, f.err
}

func (f fakeAccess) RevokeToken(_ context.Context, id string) (api.Token, error) {
	f.record("Access.RevokeToken", "", id)
	return api.Token{ID: id}, f.err
}

// fakeAudit is the fake's Auditor: entries kept in memory.
type fakeAudit struct {
	mu      sync.Mutex
	entries []api.AuditEntry
}

var _ Auditor = (*fakeAudit)(nil)

func (a *fakeAudit) Record(_ context.Context, c auth.Credential, e api.AuditEntry) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	e.Account, e.TokenID, e.TokenName, e.Remote = c.Account, c.TokenID, c.TokenName, c.Remote
	a.entries = append(a.entries, e)
	return nil
}

func (a *fakeAudit) Entries(_ context.Context, c auth.Credential, f api.AuditQuery) ([]api.AuditEntry, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []api.AuditEntry
	for _, e := range a.entries {
		if (c.TokenID == "" || e.Account == c.Account) && (f.Target == "" || e.Target == f.Target) {
			out = append(out, e)
		}
	}
	return out, nil
}

func (a *fakeAudit) take() []api.AuditEntry {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.entries
	a.entries = nil
	return out
}
