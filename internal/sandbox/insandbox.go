package sandbox

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-sandbox/cairn/internal/agent"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// llmText is /.cairn/llm.txt: the reference for agents working inside.
//
//go:embed llm.txt
var llmText []byte

// openSockets opens a sandbox's two host sockets: the agent socket that
// cairn-init dials, and the management socket that processes inside reach
// at /.cairn/api.sock, served by the handler from Config.SandboxAPI. It
// also refreshes /.cairn/llm.txt.
func (m *Manager) openSockets(sb metadata.Sandbox) (*instance, error) {
	dot := filepath.Join(m.sandboxDir(sb.ID), "dotcairn")
	if err := os.MkdirAll(dot, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dot, "llm.txt"), llmText, 0o444); err != nil {
		return nil, err
	}
	host, err := agent.Listen(m.agentSocket(sb.ID))
	if err != nil {
		return nil, err
	}
	inst := &instance{agent: host}
	if m.cfg.SandboxAPI == nil {
		return inst, nil
	}
	path := filepath.Join(dot, "api.sock")
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		host.Close()
		return nil, fmt.Errorf("management socket: %w", err)
	}
	// Processes inside run as any user; the socket only ever reaches this
	// sandbox's own checkpoints.
	os.Chmod(path, 0o666)
	inst.api = &http.Server{Handler: m.cfg.SandboxAPI(sb.ID), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := inst.api.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Warn("management socket", "sandbox", sb.Name, "err", err)
		}
	}()
	return inst, nil
}

// close closes the instance's host sockets. Requests in flight on the
// management socket (a restore asked from inside) run on in cairnd.
func (inst *instance) close() {
	inst.agent.Close()
	if inst.api != nil {
		inst.api.Close()
	}
}

// rename gives a sandbox resumed from another's memory its own hostname:
// the kernel state came from the checkpoint, hostname included.
func (m *Manager) rename(ctx context.Context, sb metadata.Sandbox) {
	m.mu.Lock()
	inst := m.live[sb.ID]
	m.mu.Unlock()
	if inst == nil {
		return
	}
	if err := inst.agent.SetHostname(ctx, sb.Name); err != nil {
		slog.Warn("set hostname of resumed copy", "sandbox", sb.Name, "err", err)
	}
}
