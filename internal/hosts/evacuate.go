package hosts

import (
	"context"
	"net/http"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// What an evacuation asks of the hosts (package evacuate does the rest):
// the lost host, where its sandboxes go, and a client of each host that
// takes some of them.

// Lost returns the host called name for an evacuation: H01 when there is
// none, H03 when it is up or is this host.
func (f *Forwarder) Lost(ctx context.Context, name string) (metadata.Host, error) {
	hs, err := f.reg.Hosts(ctx)
	if err != nil {
		return metadata.Host{}, err
	}
	for _, h := range hs {
		if h.Name != name {
			continue
		}
		switch {
		case h.ID == f.reg.Self().ID:
			return h, errdefs.New(api.CodeHostUp, "host %s is the one that got the request, and up: evacuate a host that is down, through another", name)
		case f.reg.Up(h):
			return h, errdefs.New(api.CodeHostUp, "host %s is up (its last heartbeat was %s ago): only a host that is down is evacuated; stop its cairnd first",
				name, f.reg.cfg.Now().Sub(h.HeartbeatAt).Round(1e9))
		}
		return h, nil
	}
	return metadata.Host{}, errdefs.New(api.CodeNoHost, "no host named %q (cairn host list)", name)
}

// Spread chooses the host of each of n sandboxes of the lost host: the
// host named to for all of them, or with to "" for each the host that is
// up and reachable and runs the fewest sandboxes, counting the ones given
// to it before (hosts at their capacity last, this host first among
// equals). H01 for a name no host has, H02 for a host that is down, H03
// for the lost host itself; H02 when no host is left to take them.
func (f *Forwarder) Spread(ctx context.Context, lost metadata.Host, to string, n int) ([]metadata.Host, error) {
	ls, err := f.loads(ctx)
	if err != nil {
		return nil, err
	}
	self := f.reg.Self()
	out := make([]metadata.Host, 0, n)
	if to != "" {
		for _, l := range ls {
			if l.host.Name != to {
				continue
			}
			if l.host.ID == lost.ID {
				return nil, errdefs.New(api.CodeHostUp, "host %s is the one evacuated: give another with --to", to)
			}
			if err := f.reachable(l.host); err != nil {
				return nil, err
			}
			for range n {
				out = append(out, l.host)
			}
			return out, nil
		}
		return nil, errdefs.New(api.CodeNoHost, "no host named %q (cairn host list)", to)
	}
	var cands []load
	for _, l := range ls {
		if l.host.ID != lost.ID && (l.host.ID == self.ID || f.reachable(l.host) == nil) {
			cands = append(cands, l)
		}
	}
	if len(cands) == 0 {
		return nil, errdefs.New(api.CodeHostDown, "no host that is up can take the sandboxes of %s", lost.Name)
	}
	full := func(l load) bool { return l.host.Capacity > 0 && l.running >= l.host.Capacity }
	for range n {
		best := 0
		for i, c := range cands[1:] {
			b := cands[best]
			switch {
			case full(c) != full(b):
				if !full(c) {
					best = i + 1
				}
			case c.running != b.running:
				if c.running < b.running {
					best = i + 1
				}
			case c.host.ID == self.ID:
				best = i + 1
			}
		}
		cands[best].running++
		out = append(out, cands[best].host)
	}
	return out, nil
}

// Peer returns a client of host h that speaks as this host for the unix
// socket's administrator (api.CallerSocket): one host asking another to
// take over its share of an evacuation.
func (f *Forwarder) Peer(h metadata.Host) *client.Client {
	self := f.reg.Self()
	hc := &http.Client{Transport: peerTransport{next: f.transport(h), proof: self.ID + " " + f.reg.PeerKey()}}
	return client.NewHTTP("https://"+h.APIAddress, hc)
}

// peerTransport adds this host's proof to every request.
type peerTransport struct {
	next  http.RoundTripper
	proof string
}

func (t peerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(api.PeerHeader, t.proof)
	r.Header.Set(api.CallerHeader, api.CallerSocket)
	r.Header.Del("Authorization")
	return t.next.RoundTrip(r)
}

// Self is this host as registered.
func (f *Forwarder) Self() metadata.Host { return f.reg.Self() }
