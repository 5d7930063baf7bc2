// Package evacuate restores the sandboxes of a host that is down on the
// hosts that are up (issue 22; docs/several-hosts.md): each from its
// newest checkpoint with an off-site copy, under its name and id, lazily
// unless asked for whole. The host that gets the request spreads them
// (hosts.Forwarder.Spread), takes over its own share (sandbox.Manager's
// Evacuate) and asks each other host to take over its share with the same
// request, naming the host and the sandboxes; then it gathers the reports.
package evacuate

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// Hosts are the hosts as an evacuation needs them (hosts.Forwarder).
type Hosts interface {
	// Lost returns the host called name: H01 for none, H03 when it is
	// up or is this host.
	Lost(ctx context.Context, name string) (metadata.Host, error)
	// Spread chooses the host of each of n sandboxes of lost: all on to,
	// or with to "" spread over the hosts that are up.
	Spread(ctx context.Context, lost metadata.Host, to string, n int) ([]metadata.Host, error)
	// Peer is a client of host h that speaks as this host.
	Peer(h metadata.Host) *client.Client
	// Self is this host.
	Self() metadata.Host
}

// Local takes over on this host the sandboxes with these ids
// (sandbox.Manager.Evacuate).
type Local func(ctx context.Context, op *operation.Op, ids []string, whole bool) []api.Evacuated

// Evacuator runs evacuations.
type Evacuator struct {
	Hosts Hosts
	Store metadata.Store
	Ops   *operation.Registry
	Local Local
}

// Evacuate starts the evacuation of the host called name (see the package
// comment). Everything is checked before the operation starts: the host
// exists and is down, the target hosts are up.
func (e *Evacuator) Evacuate(ctx context.Context, name string, req api.EvacuateRequest) (*operation.Op, error) {
	lost, err := e.Hosts.Lost(ctx, name)
	if err != nil {
		return nil, err
	}
	sbs, gone, err := e.sandboxesOf(ctx, lost, req.Sandboxes)
	if err != nil {
		return nil, err
	}
	var targets []metadata.Host
	if len(sbs) > 0 {
		if targets, err = e.Hosts.Spread(ctx, lost, req.To, len(sbs)); err != nil {
			return nil, err
		}
	}
	shares := map[string][]string{} // sandbox ids by host id
	byID := map[string]metadata.Host{}
	for i, sb := range sbs {
		shares[targets[i].ID] = append(shares[targets[i].ID], sb.ID)
		byID[targets[i].ID] = targets[i]
	}
	return e.Ops.Start("host.evacuate", "host/"+lost.Name, func(ctx context.Context, op *operation.Op) (any, error) {
		rep := api.EvacuationReport{Host: lost.Name, Sandboxes: []api.Evacuated{}}
		for _, id := range gone {
			rep.Sandboxes = append(rep.Sandboxes, e.gone(ctx, lost, id))
		}
		if len(sbs) == 0 && len(gone) == 0 {
			op.Step(api.PhaseDone, "Host %s holds no sandbox: nothing to evacuate", lost.Name)
			return rep, nil
		}
		if len(sbs) > 0 {
			op.Step(api.PhaseEvacuate, "Restoring the %d sandboxes of host %s on %s", len(sbs), lost.Name, hostNames(byID))
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for id, ids := range shares {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got := e.share(ctx, op, byID[id], lost, ids, req.Whole)
				mu.Lock()
				rep.Sandboxes = append(rep.Sandboxes, got...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		sort.Slice(rep.Sandboxes, func(i, j int) bool {
			a, b := rep.Sandboxes[i], rep.Sandboxes[j]
			if a.Account != b.Account {
				return a.Account < b.Account
			}
			return a.Name < b.Name
		})
		for _, s := range rep.Sandboxes {
			if s.Error != nil {
				rep.Failed++
			} else {
				rep.Restored++
			}
			rep.Lost += len(s.Lost)
		}
		op.Step(api.PhaseDone, "Host %s evacuated: %d sandboxes restored, %d not; %d checkpoints were only on %s", lost.Name, rep.Restored, rep.Failed, rep.Lost, lost.Name)
		return rep, nil
	}), nil
}

// sandboxesOf returns the sandboxes host lost holds, of every account:
// with ids given, those of them it still holds, and gone, the ones it no
// longer holds (moved meanwhile, or deleted), each reported on its own.
func (e *Evacuator) sandboxesOf(ctx context.Context, lost metadata.Host, only []string) (sbs []metadata.Sandbox, gone []string, err error) {
	all, err := e.Store.AllSandboxes(ctx)
	if err != nil {
		return nil, nil, err
	}
	want := map[string]bool{}
	for _, id := range only {
		want[id] = true
	}
	for _, sb := range all {
		if sb.HostID != lost.ID {
			continue
		}
		if len(only) == 0 || want[sb.ID] {
			sbs = append(sbs, sb)
			delete(want, sb.ID)
		}
	}
	for _, id := range only {
		if want[id] {
			gone = append(gone, id)
			delete(want, id)
		}
	}
	return sbs, gone, nil
}

// gone is the report of a sandbox asked for that the lost host no longer
// holds: where it is now, or that there is none.
func (e *Evacuator) gone(ctx context.Context, lost metadata.Host, id string) api.Evacuated {
	ev := api.Evacuated{ID: id, Error: &api.ErrorInfo{Code: api.CodeNoSandbox, Message: fmt.Sprintf("host %s holds no sandbox with id %q (deleted meanwhile)", lost.Name, id)}}
	sb, err := e.Store.SandboxByID(ctx, id)
	if err != nil {
		return ev
	}
	ev.Name, ev.State = sb.Name, string(sb.State)
	ev.Error = &api.ErrorInfo{Code: api.CodeHostUp, Message: fmt.Sprintf("sandbox %s is no longer on host %s: another host took it over meanwhile", sb.Name, lost.Name)}
	if acct, err := metadata.AccountByID(ctx, e.Store, sb.AccountID); err == nil {
		ev.Account = acct.Name
	}
	return ev
}

// share takes over the sandboxes ids on host h: here, or through h's API
// (the same request, naming h and the sandboxes). A host that fails
// leaves each of its share reported with the error.
func (e *Evacuator) share(ctx context.Context, op *operation.Op, h, lost metadata.Host, ids []string, whole bool) []api.Evacuated {
	if h.ID == e.Hosts.Self().ID {
		return e.Local(ctx, op, ids, whole)
	}
	peer := e.Hosts.Peer(h)
	sub, err := peer.EvacuateHost(ctx, lost.Name, api.EvacuateRequest{To: h.Name, Sandboxes: ids, Whole: whole})
	var rep api.EvacuationReport
	if err == nil {
		rep, err = peer.WaitEvacuation(ctx, sub, func(ev api.Event) {
			if s, ok := ev.Data.(string); ok && ev.Type != api.EventComplete {
				op.Infof("%s: %s", h.Name, s)
			}
		})
	}
	if err == nil {
		return rep.Sandboxes
	}
	info := &api.ErrorInfo{Code: client.CodeOf(err), Message: fmt.Sprintf("host %s: %v", h.Name, err)}
	var ce *client.Error
	if errors.As(err, &ce) {
		info.Message = fmt.Sprintf("host %s: %s", h.Name, ce.Message)
	}
	if info.Code == "" {
		info.Code = api.CodeHostDown
	}
	op.Notef(api.PhaseEvacuate, "Host %s did not take over its %d sandboxes: %s", h.Name, len(ids), info.Message)
	out := make([]api.Evacuated, 0, len(ids))
	for _, id := range ids {
		ev := api.Evacuated{ID: id, Host: lost.Name, Error: info}
		if sb, err := e.Store.SandboxByID(ctx, id); err == nil {
			ev.Name = sb.Name
			if acct, err := metadata.AccountByID(ctx, e.Store, sb.AccountID); err == nil {
				ev.Account = acct.Name
			}
		}
		out = append(out, ev)
	}
	return out
}

func hostNames(hs map[string]metadata.Host) string {
	var names []string
	for _, h := range hs {
		names = append(names, h.Name)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
