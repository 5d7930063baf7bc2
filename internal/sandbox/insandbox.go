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
	"sort"
	"time"

	"github.com/cairn-sandbox/cairn/internal/agent"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// llmText is /.cairn/llm.txt: the reference for agents working inside.
//
//go:embed llm.txt
var llmText []byte

// browseCount is how many of the newest checkpoints a sandbox sees under
// /.cairn/checkpoints.
const browseCount = 5

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

// browseDir is the pool directory bound read-only at /.cairn/checkpoints.
func (m *Manager) browseDir(id string) string {
	return filepath.Join(m.cfg.Pool.Root(), "browse", id)
}

// A checkpoint's disk lives in exactly one subvolume, so that btrfs'
// accounting of what it alone holds stays exact: in its sandbox's browse
// directory (bound read-only at /.cairn/checkpoints) while it is one of the
// sandbox's five newest, in checkpoints/<global id> otherwise. A
// read-only subvolume cannot be renamed into another directory, so moving
// one is a snapshot (constant time) and a delete. Everything that reads a
// checkpoint's disk holds its sandbox's disk lock, under which moves happen.

// ckPath is where checkpoint ck's disk is now. The caller holds the disk
// lock of ck's sandbox.
func (m *Manager) ckPath(ck metadata.Checkpoint) string {
	browse := filepath.Join(m.browseDir(ck.SandboxID), ck.Seq)
	if ok, _ := volume.IsSubvolume(browse); ok {
		return browse
	}
	return m.cfg.Pool.CheckpointPath(ck.ID)
}

// moveCheckpoint moves a checkpoint's disk subvolume from src to dst.
func (m *Manager) moveCheckpoint(ctx context.Context, src, dst string) error {
	if err := m.cfg.Pool.Snapshot(ctx, src, dst, true); err != nil {
		return err
	}
	// Until btrfs has cleaned src, dst shares all its data with it and
	// would look free: wait for it.
	return m.cfg.Pool.Reclaim(ctx, src)
}

// refreshBrowse makes /.cairn/checkpoints hold exactly the sandbox's five
// newest checkpoints, named by their ids, moving checkpoints in and out. A
// running gVisor sandbox sees subvolumes appear and vanish there (it would
// not see new mounts). The caller holds the sandbox's disk lock.
func (m *Manager) refreshBrowse(ctx context.Context, sb metadata.Sandbox) error {
	dir := m.browseDir(sb.ID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cks, err := m.cfg.Store.ListCheckpoints(ctx, sb.AccountID, metadata.CheckpointFilter{SandboxID: sb.ID, IncludeAuto: true})
	if err != nil {
		return err
	}
	sort.SliceStable(cks, func(i, j int) bool { return cks[i].CreatedAt.After(cks[j].CreatedAt) })
	bySeq := map[string]metadata.Checkpoint{}
	for _, ck := range cks {
		bySeq[ck.Seq] = ck
	}
	want := map[string]bool{}
	for i := 0; i < len(cks) && i < browseCount; i++ {
		want[cks[i].Seq] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if want[e.Name()] {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if ck, ok := bySeq[e.Name()]; ok { // out of the five newest: move out
			if err := m.moveCheckpoint(ctx, path, m.cfg.Pool.CheckpointPath(ck.ID)); err != nil {
				return err
			}
			continue
		}
		if err := m.cfg.Pool.Delete(ctx, path); err != nil { // no checkpoint any more
			return err
		}
	}
	for seq := range want {
		src := m.cfg.Pool.CheckpointPath(bySeq[seq].ID)
		if ok, _ := volume.IsSubvolume(src); !ok {
			continue // already in place
		}
		dst := filepath.Join(dir, seq)
		if ok, _ := volume.IsSubvolume(dst); ok {
			// A move a crash interrupted: both copies are whole.
			if err := m.cfg.Pool.Delete(ctx, src); err != nil {
				return err
			}
			continue
		}
		if err := m.moveCheckpoint(ctx, src, dst); err != nil {
			return err
		}
	}
	return nil
}

// refreshBrowseSoon refreshes /.cairn/checkpoints in the background, once
// the caller has released the disk lock: off the path of a checkpoint.
func (m *Manager) refreshBrowseSoon(sb metadata.Sandbox) {
	go func() {
		defer m.lockDisk(sb.ID)()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := m.cfg.Store.SandboxByID(ctx, sb.ID); err != nil {
			return // deleted meanwhile
		}
		logErr("refresh /.cairn/checkpoints", m.refreshBrowse(ctx, sb), "sandbox", sb.Name)
	}()
}

// removeBrowse moves every checkpoint out of a sandbox's browse directory
// (checkpoints outlive their sandbox), deletes what no checkpoint owns and
// the directory itself. The caller holds the sandbox's disk lock.
func (m *Manager) removeBrowse(ctx context.Context, id string) error {
	dir := m.browseDir(id)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if ck, err := m.cfg.Store.CheckpointBySeq(ctx, id, e.Name()); err == nil {
			if err := m.moveCheckpoint(ctx, path, m.cfg.Pool.CheckpointPath(ck.ID)); err != nil {
				return err
			}
			continue
		}
		if err := m.cfg.Pool.Delete(ctx, path); err != nil {
			return err
		}
	}
	return os.Remove(dir)
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
