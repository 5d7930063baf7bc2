package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/container"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/network"
)

// Networks gives containers their networks (package network). Each
// container has its own, named after it: a restore in place starts the
// new container while the old one is still being removed.
type Networks interface {
	Attach(ctx context.Context, container string, mode network.Mode, rules network.Rules) (network.Attachment, error)
	Exists(container string) bool
	Update(container string, mode network.Mode, rules network.Rules) error
	Detach(container string) error
	DialSandbox(ctx context.Context, container string, port int) (net.Conn, error)
}

// imageNetworkFile, beside a memory image, says which network the
// container had: a resume must give it the same (an interface or none),
// whatever the sandbox's mode is now. An image without it was saved
// before networking: none.
const imageNetworkFile = "cairn-network"

func saveImageNetwork(dir, mode string) error {
	if mode == "" {
		mode = metadata.NetworkNone
	}
	return os.WriteFile(filepath.Join(dir, imageNetworkFile), []byte(mode+"\n"), 0o600)
}

func imageNetwork(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, imageNetworkFile))
	if err == nil && strings.TrimSpace(string(b)) == metadata.NetworkEgress {
		return metadata.NetworkEgress
	}
	return metadata.NetworkNone
}

// containerNetwork is the network a container of sb gets: the sandbox's
// mode when it boots, the image's when it resumes from memImage.
func containerNetwork(sb metadata.Sandbox, memImage string) string {
	if memImage != "" {
		return imageNetwork(memImage)
	}
	if sb.Network.Mode == metadata.NetworkEgress {
		return metadata.NetworkEgress
	}
	return metadata.NetworkNone
}

// attachNetwork gives the container name of sb the network mode says
// (none: loopback only, nothing to make) and sets spec to join it.
func (r *runner) attachNetwork(ctx context.Context, sb metadata.Sandbox, name, mode string, spec *container.Spec) error {
	spec.Options.Network, spec.NetNS = container.NetworkNone, ""
	if mode != metadata.NetworkEgress {
		return nil
	}
	if r.cfg.Networks == nil {
		return errdefs.New(api.CodeNetworkUnavailable, "sandbox %s needs a network, and this cairnd has networking off (start it without --network-off)", sb.Name)
	}
	att, err := r.cfg.Networks.Attach(ctx, name, network.Mode(sb.Network.Mode), rulesOf(sb))
	if err != nil {
		return errdefs.Wrap(api.CodeNetworkUnavailable, err, "network of sandbox %s", sb.Name)
	}
	spec.Options.Network, spec.NetNS = container.NetworkSandbox, att.NetNS
	spec.Mounts = append(spec.Mounts, container.Mount{Source: att.ResolvConf, Destination: "/etc/resolv.conf", ReadOnly: true})
	return nil
}

// detachNetwork removes container name's network, if it has one.
func (r *runner) detachNetwork(sb metadata.Sandbox, name string) {
	if r.cfg.Networks != nil {
		logErr("remove the container's network", r.cfg.Networks.Detach(name), "sandbox", sb.Name, "container", name)
	}
}

func rulesOf(sb metadata.Sandbox) network.Rules {
	return network.Rules{Allow: sb.Network.Allow, Deny: sb.Network.Deny}
}

// DialSandbox connects to TCP port inside the running sandbox id (for
// published ports and port forwards).
func (m *Manager) DialSandbox(ctx context.Context, id string, port int) (net.Conn, error) {
	release := m.hold(id) // before the row is read: see Exec
	if sb, err := m.cfg.Store.SandboxByID(ctx, id); err == nil && sb.Settings.Asleep {
		account, err := m.accountName(ctx, sb.AccountID)
		if err == nil {
			err = m.wakeIfAsleep(ctx, account, sb)
		}
		if err != nil {
			release()
			return nil, err
		}
	}
	conn, err := m.dialSandbox(ctx, id, port)
	if err != nil {
		release()
		return nil, err
	}
	return heldConn{conn, release}, nil
}

// heldConn keeps its sandbox awake until it closes.
type heldConn struct {
	net.Conn
	release func()
}

func (h heldConn) Close() error {
	defer h.release()
	return h.Conn.Close()
}

// CloseWrite half-closes the connection when it can (a TCP one), as the
// connection it holds would.
func (h heldConn) CloseWrite() error {
	if cw, ok := h.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return h.Close()
}

func (m *Manager) dialSandbox(ctx context.Context, id string, port int) (net.Conn, error) {
	inst := m.cfg.Instances.get(id)
	if inst == nil {
		return nil, errdefs.New(api.CodeNotRunning, "the sandbox is not running")
	}
	if inst.network != metadata.NetworkEgress || m.cfg.Networks == nil {
		return nil, errdefs.New(api.CodeNetworkUnavailable, "the sandbox has no network (mode none): cairn network set NAME --mode egress, then restart it")
	}
	conn, err := m.cfg.Networks.DialSandbox(ctx, inst.container, port)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) {
			return nil, errdefs.New(api.CodePortUnreachable, "nothing listens on port %d in the sandbox", port)
		}
		return nil, fmt.Errorf("connect to port %d: %w", port, err)
	}
	return conn, nil
}

// networkedRuntime removes a container's network with the container,
// wherever the container is deleted from.
type networkedRuntime struct {
	Runtime
	nets Networks
}

func (r networkedRuntime) Delete(ctx context.Context, id string) error {
	if err := r.Runtime.Delete(ctx, id); err != nil {
		return err
	}
	return r.nets.Detach(id)
}

// applyNetworkChange is cur changed by ch, checked.
func applyNetworkChange(cur metadata.NetworkSettings, ch *api.NetworkChange) (metadata.NetworkSettings, error) {
	out := metadata.NetworkSettings{Mode: cur.Mode, Allow: slices.Clone(cur.Allow), Deny: slices.Clone(cur.Deny)}
	if ch == nil {
		return out, nil
	}
	if ch.Mode != "" {
		mode, err := network.ParseMode(ch.Mode)
		if err != nil {
			return out, errdefs.New(api.CodeInvalidArgument, "--network: %v", err)
		}
		out.Mode = string(mode)
	}
	if ch.Allow != nil {
		out.Allow = slices.Clone(*ch.Allow)
	}
	if ch.Deny != nil {
		out.Deny = slices.Clone(*ch.Deny)
	}
	if len(out.Allow) == 0 {
		out.Allow = nil
	}
	if len(out.Deny) == 0 {
		out.Deny = nil
	}
	if err := network.CheckRules(rulesOf(metadata.Sandbox{Network: out})); err != nil {
		return out, errdefs.New(api.CodeInvalidRule, "%v", err)
	}
	return out, nil
}

// updateNetwork gives the running container of sb (if it has a network)
// sb's network settings at once.
func (m *Manager) updateNetwork(sb metadata.Sandbox) error {
	inst := m.cfg.Instances.get(sb.ID)
	if inst == nil || inst.network != metadata.NetworkEgress || m.cfg.Networks == nil {
		return nil
	}
	if err := m.cfg.Networks.Update(inst.container, network.Mode(sb.Network.Mode), rulesOf(sb)); err != nil {
		return errdefs.Wrap(api.CodeNetworkUnavailable, err, "change the network of sandbox %s", sb.Name)
	}
	return nil
}

// copyPorts gives a fork or a sandbox restored as new the published ports
// of the sandbox it came from (none if that one is gone).
func (m *Manager) copyPorts(ctx context.Context, sb metadata.Sandbox) error {
	src := sb.ParentID
	if src == "" && sb.SourceCheckpoint != "" {
		ck, err := m.cfg.Store.CheckpointByID(ctx, sb.SourceCheckpoint)
		if err != nil {
			return nil // the checkpoint went meanwhile: nothing to copy from
		}
		src = ck.SandboxID
	}
	if src == "" {
		return nil
	}
	if err := m.cfg.Store.CopyPorts(ctx, src, sb.ID); err != nil {
		return fmt.Errorf("copy the published ports of the source: %w", err)
	}
	return nil
}
