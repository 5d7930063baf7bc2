package hosts

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/apitls"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Forwarder answers where a request goes among the hosts, places new
// sandboxes and forwards requests for other hosts' sandboxes to them: an
// HTTPS request to the host's API address, its certificate pinned to the
// fingerprint the host registered, proving this host with its peer key
// (api.PeerHeader) and saying whom it speaks for (api.CallerHeader; a
// caller's token goes on as it came, and the host it reaches checks it
// again). Exec and the other upgraded streams are forwarded as upgrades,
// NDJSON streams flushed as they come.
type Forwarder struct {
	reg   *Registry
	store metadata.Store
	// builtin says whether every host has the image of that name (a
	// built-in one, made where it is first used).
	builtin func(image string) bool

	mu         sync.Mutex
	transports map[string]*pinned // by host id
	// ops are the operations other hosts started for requests this host
	// forwarded (the id of an answer 202): the operation's host, by id.
	ops map[string]string
}

// maxOps bounds the operations remembered; past it, the map starts again
// (an operation followed since is then asked of this host, O01).
const maxOps = 10000

// pinned is the transport to one host, for one certificate.
type pinned struct {
	fingerprint string
	tr          *http.Transport
}

// NewForwarder returns the forwarder of reg's host; builtin says which
// images every host has.
func NewForwarder(reg *Registry, store metadata.Store, builtin func(image string) bool) *Forwarder {
	return &Forwarder{reg: reg, store: store, builtin: builtin, transports: map[string]*pinned{}, ops: map[string]string{}}
}

// VerifyPeer checks a forwarded request's proof, "HOST-ID KEY", and
// returns the name of the host that sent it.
func (f *Forwarder) VerifyPeer(ctx context.Context, proof string) (string, error) {
	id, key, ok := strings.Cut(proof, " ")
	if !ok || id == f.reg.Self().ID {
		return "", errors.New("not a proof of another host")
	}
	h, err := f.reg.VerifyPeer(ctx, id, key)
	if err != nil {
		return "", err
	}
	return h.Name, nil
}

// SandboxHost returns the id of the host that runs the account's sandbox
// called name when it is another host ("" when it is this one, or there
// is no such sandbox: the request is then answered here).
func (f *Forwarder) SandboxHost(ctx context.Context, account, name string) (string, error) {
	if !f.reg.Shared() {
		return "", nil
	}
	acct, err := f.store.AccountByName(ctx, account)
	if errors.Is(err, metadata.ErrNotFound) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	sb, err := f.store.SandboxByName(ctx, acct.ID, name)
	if errors.Is(err, metadata.ErrNotFound) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	if f.reg.Mine(sb.HostID) || sb.HostID == "" {
		return "", nil
	}
	return sb.HostID, nil
}

// load is one host with what runs on it.
type load struct {
	host      metadata.Host
	running   int
	sandboxes int
}

func (f *Forwarder) loads(ctx context.Context) ([]load, error) {
	hs, err := f.reg.Hosts(ctx)
	if err != nil {
		return nil, err
	}
	sbs, err := f.store.AllSandboxes(ctx)
	if err != nil {
		return nil, err
	}
	running, held := map[string]int{}, map[string]int{}
	self := f.reg.Self().ID
	for _, sb := range sbs {
		id := sb.HostID
		if id == "" && !f.reg.Shared() {
			id = self
		}
		held[id]++
		if sb.State == metadata.SandboxRunning {
			running[id]++
		}
	}
	out := make([]load, 0, len(hs))
	for _, h := range hs {
		out = append(out, load{host: h, running: running[h.ID], sandboxes: held[h.ID]})
	}
	return out, nil
}

// List returns every host with its state and load, by name.
func (f *Forwarder) List(ctx context.Context) ([]api.Host, error) {
	ls, err := f.loads(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.Host, 0, len(ls))
	for _, l := range ls {
		st := api.HostUp
		if !f.reg.Up(l.host) {
			st = api.HostDown
		}
		out = append(out, api.Host{Name: l.host.Name, ID: l.host.ID, State: st, API: l.host.APIAddress, Capacity: l.host.Capacity,
			Running: l.running, Sandboxes: l.sandboxes, This: l.host.ID == f.reg.Self().ID,
			StartedAt: l.host.StartedAt, HeartbeatAt: l.host.HeartbeatAt})
	}
	return out, nil
}

// Place chooses the host of a new sandbox of image: the host named want,
// or, with want "", the one that is up, reachable and runs the fewest
// sandboxes (hosts at their capacity last; this host first among
// equals). An image that is not a built-in one (pulled, imported or built
// on one host) is made here unless want names another host. "" is this
// host. H01 for a name no host has, H02 for a host that is down or has no
// API address.
func (f *Forwarder) Place(ctx context.Context, want, image string) (string, error) {
	anywhere := image == "" || f.builtin == nil || f.builtin(image)
	self := f.reg.Self()
	if want == "" && (!f.reg.Shared() || !anywhere) || want == self.Name {
		return "", nil
	}
	ls, err := f.loads(ctx)
	if err != nil {
		return "", err
	}
	if want != "" {
		for _, l := range ls {
			if l.host.Name != want {
				continue
			}
			if err := f.reachable(l.host); err != nil {
				return "", err
			}
			return l.host.ID, nil
		}
		return "", errdefs.New(api.CodeNoHost, "no host named %q (cairn host list)", want)
	}
	var cands []load
	for _, l := range ls {
		if l.host.ID == self.ID || f.reachable(l.host) == nil {
			cands = append(cands, l)
		}
	}
	full := func(l load) bool { return l.host.Capacity > 0 && l.running >= l.host.Capacity }
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if full(a) != full(b) {
			return !full(a)
		}
		if a.running != b.running {
			return a.running < b.running
		}
		return a.host.ID == self.ID && b.host.ID != self.ID
	})
	if len(cands) == 0 || cands[0].host.ID == self.ID {
		return "", nil
	}
	return cands[0].host.ID, nil
}

// reachable fails with H02 unless h is up and has an API address.
func (f *Forwarder) reachable(h metadata.Host) error {
	switch {
	case !f.reg.Up(h):
		return errdefs.New(api.CodeHostDown, "host %s is down: no heartbeat since %s", h.Name, h.HeartbeatAt.Format(time.RFC3339))
	case h.APIAddress == "" && h.ID != f.reg.Self().ID:
		return errdefs.New(api.CodeHostDown, "host %s has no API address the other hosts reach (cairnd --listen, --advertise)", h.Name)
	}
	return nil
}

// Forward serves r on the host with id hostID; caller is api.CallerToken
// or api.CallerSocket. fail answers an error that came before anything
// was written (the host down, unreachable, refusing the connection).
func (f *Forwarder) Forward(w http.ResponseWriter, r *http.Request, hostID, caller string, fail func(error)) {
	h, err := f.reg.Host(r.Context(), hostID)
	if errors.Is(err, metadata.ErrNotFound) {
		fail(errdefs.New(api.CodeHostDown, "the sandbox's host %s is not registered", hostID))
		return
	} else if err != nil {
		fail(err)
		return
	}
	if err := f.reachable(h); err != nil {
		fail(err)
		return
	}
	if r.Header.Get("Upgrade") != "" {
		// The upgraded stream lives as long as its session: no deadline
		// of this server's request reading or writing cuts it.
		rc := http.NewResponseController(w)
		rc.SetReadDeadline(time.Time{})
		rc.SetWriteDeadline(time.Time{})
	}
	self := f.reg.Self()
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// Dialled at the host's address, pinned to its certificate;
			// the Host header stays the one the client addressed, which a
			// console page's Origin is checked against there.
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "https", h.APIAddress, pr.In.Host
			pr.Out.Header.Del(api.PeerHeader)
			pr.Out.Header.Del(api.CallerHeader)
			pr.Out.Header.Set(api.PeerHeader, self.ID+" "+f.reg.PeerKey())
			pr.Out.Header.Set(api.CallerHeader, caller)
			if caller == api.CallerSocket {
				pr.Out.Header.Del("Authorization")
			}
		},
		Transport:      f.transport(h),
		FlushInterval:  -1,
		ModifyResponse: func(resp *http.Response) error { return f.noteOperation(resp, h.ID) },
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the caller went away
			}
			fail(errdefs.Wrap(api.CodeHostDown, err, "host %s did not answer", h.Name))
		},
	}
	proxy.ServeHTTP(w, r)
}

// OperationHost returns the host of an operation another host started
// for a request this one forwarded; "" for one of this host's (or
// unknown).
func (f *Forwarder) OperationHost(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ops[id]
}

// noteOperation remembers the operation an answer 202 of host started, so
// that following it here (GET /v1/operations/{id}) goes there too.
func (f *Forwarder) noteOperation(resp *http.Response, host string) error {
	if resp.StatusCode != http.StatusAccepted || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var op struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(body, &op) == nil && op.ID != "" {
		f.mu.Lock()
		if len(f.ops) >= maxOps {
			clear(f.ops)
		}
		f.ops[op.ID] = host
		f.mu.Unlock()
	}
	return nil
}

// transport returns the pooled connections to h, pinned to its
// certificate.
func (f *Forwarder) transport(h metadata.Host) *http.Transport {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.transports[h.ID]; p != nil && p.fingerprint == h.TLSFingerprint {
		return p.tr
	} else if p != nil {
		p.tr.CloseIdleConnections()
	}
	want := h.TLSFingerprint
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 5 * time.Second,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     90 * time.Second,
		TLSClientConfig: &tls.Config{
			MinVersion: tls.VersionTLS12,
			// An exec's upgraded connection is never reused: each opens
			// one, and a resumed session spares it the full handshake.
			ClientSessionCache: tls.NewLRUClientSessionCache(64),
			// The host's certificate is checked below against the
			// fingerprint it registered, not against a CA: cairnd's
			// own certificates are self-signed.
			InsecureSkipVerify: true,
			VerifyConnection: func(cs tls.ConnectionState) error {
				if len(cs.PeerCertificates) == 0 {
					return errors.New("the host showed no certificate")
				}
				if got := apitls.Fingerprint(cs.PeerCertificates[0].Raw); got != want {
					return fmt.Errorf("the host's certificate is %s, not the %s it registered", got, want)
				}
				return nil
			},
		},
	}
	f.transports[h.ID] = &pinned{fingerprint: want, tr: tr}
	return tr
}
