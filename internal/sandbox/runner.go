package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/agent"
	"github.com/cairn-sandbox/cairn/internal/container"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/httpedge"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/revert"
)

// runner runs sandboxes' containers, the mechanism under the manager's
// policy: it opens a sandbox's host sockets (the agent socket cairn-init
// dials, the management socket), writes its OCI spec with the binds
// (/.cairn, /.cairn/bin, /.cairn/checkpoints), starts it or resumes it
// from a memory image and waits for cairn-init, stops it gracefully or by
// force, and retires a replaced container in the background. What runs is
// kept in Instances.
type runner struct {
	cfg Config
	ex  *exclusion
	// retirements waits for the containers being removed in the
	// background (see retireContainer).
	retirements sync.WaitGroup
	// died and oomKilled are told what the watch of an instance sees
	// (watch.go): the manager's crash handling.
	died      func(sb metadata.Sandbox, inst *instance, reason string)
	oomKilled func(sb metadata.Sandbox, kill api.OOMKill)
	// started is told of each container started (every start, restart,
	// restore and wake): the sandbox's timeout counts from there.
	started func(sb metadata.Sandbox)
	// booting is told of each container about to boot (not a resume from
	// memory), before it starts; discard is called if the start fails
	// (access.go records a boot's reads).
	booting func(sb metadata.Sandbox) (discard func())
	// fills are the lazy restores' fills (lazy.go).
	fills fills
}

// detach takes sandbox id's instance out of the live ones and returns it
// (nil if it had none) and the name of its container.
func (r *runner) detach(id string) (*instance, string) {
	inst := r.cfg.Instances.take(id)
	if inst != nil && inst.container != "" {
		return inst, inst.container
	}
	return inst, id
}

// retireContainer ends the sandbox's container at once, without asking its
// processes to exit: for a restore in place, whose current state is either
// saved in the safety checkpoint or was asked to be thrown away. The
// processes are killed before it returns; waiting for them to exit and
// removing the container happen in the background, while a new container
// of the sandbox may already start (under a fresh name). If the processes
// cannot be killed that way, the container is removed before it returns.
func (r *runner) retireContainer(ctx context.Context, sb metadata.Sandbox) error {
	inst, name := r.detach(sb.ID)
	if inst != nil {
		inst.close()
	}
	if _, gen := sandboxOfContainer(name); gen == 0 {
		// An earlier cairn's bare-id name: runsc could no longer tell it
		// from the next container's (see above).
		return r.deleteContainer(ctx, sb, name)
	}
	wait, err := r.cfg.Runtime.KillProcesses(ctx, name)
	if err != nil {
		slog.Debug("retire container: removing it before going on", "sandbox", sb.Name, "container", name, "err", err)
		return r.deleteContainer(ctx, sb, name)
	}
	r.retirements.Go(func() {
		ctx := context.Background()
		logErr("retire container: wait for its processes", wait(ctx), "sandbox", sb.Name, "container", name)
		logErr("retire container: delete", r.cfg.Runtime.Delete(ctx, name), "sandbox", sb.Name, "container", name)
	})
	return nil
}

// removeContainer removes the sandbox's container at once, killing
// whatever still runs in it: for a sandbox whose processes have ended
// already (a saved session).
func (r *runner) removeContainer(ctx context.Context, sb metadata.Sandbox) error {
	inst, name := r.detach(sb.ID)
	if inst != nil {
		inst.close()
	}
	return r.deleteContainer(ctx, sb, name)
}

func (r *runner) deleteContainer(ctx context.Context, sb metadata.Sandbox, name string) error {
	if err := r.cfg.Runtime.Delete(context.WithoutCancel(ctx), name); err != nil {
		return errdefs.Wrap(api.CodeRuntimeFailed, err, "stop sandbox %s", sb.Name)
	}
	r.lazyStopped(sb.ID)
	return nil
}

// startContainer opens the sandbox's sockets, starts the container (from
// the memory image memImage, if not "", so its processes resume instead
// of booting) and waits until cairn-init inside answers. On failure
// nothing runs.
func (r *runner) startContainer(ctx context.Context, sb metadata.Sandbox, memImage string) error {
	undo := revert.New()
	defer undo.Fail()

	dir := r.sandboxDir(sb.ID)
	// /.cairn/checkpoints must exist to be bound: published before the
	// start, it shows the sandbox's newest checkpoints from the first
	// moment.
	if err := r.cfg.Disks.Publish(ctx, sb); err != nil {
		return fmt.Errorf("browse view: %w", err)
	}
	memImage, stdin, err := r.agentKey(sb, memImage)
	if err != nil {
		return err
	}
	inst, err := r.openSockets(sb)
	if err != nil {
		return err
	}
	undo.Add(inst.close)
	name := newContainerName(sb.ID)
	root, err := r.rootOf(ctx, sb)
	if err != nil {
		return err
	}
	undo.Add(func() { r.lazyStopped(sb.ID) })
	spec := container.Spec{
		ID:       name,
		Hostname: sb.Name,
		Root:     root,
		Args:     []string{"/.cairn/bin/cairn-init"},
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "CAIRN_SANDBOX=" + sb.Name,
			"CAIRN_MEMORY_LIMIT=" + strconv.FormatInt(sb.MemoryBytes, 10)}, // for cairn-init's OOM killer
		Mounts: []container.Mount{
			{Source: filepath.Join(dir, "dotcairn"), Destination: "/.cairn", ReadOnly: true},
			{Source: filepath.Join(r.cfg.DataDir, "bin"), Destination: "/.cairn/bin", ReadOnly: true},
			{Source: r.cfg.BrowseDir(sb.ID), Destination: "/.cairn/checkpoints", ReadOnly: true},
		},
		Options:   container.Options{CPUs: sb.CPUs, MemoryBytes: sb.MemoryBytes},
		BundleDir: filepath.Join(dir, "bundle"),
		LogPath:   filepath.Join(dir, "console.log"),
		Stdin:     stdin,
	}
	spec.Env = append(spec.Env, imageEnv(r.cfg.Images.Config(ctx, sb.Image))...)
	spec.Env = append(spec.Env, settingsEnv(sb.Settings)...)
	if err := r.cfg.Disks.LimitRoot(ctx, sb); err != nil {
		return err
	}
	// The network is made at each try: deleting a container left with
	// the same name removes its network too.
	netMode := containerNetwork(sb, memImage)
	undo.Add(func() { r.detachNetwork(sb, name) })
	baseMounts := spec.Mounts
	launch := func() (int, error) {
		spec.Mounts = slices.Clone(baseMounts)
		if err := r.attachNetwork(ctx, sb, name, netMode, &spec); err != nil {
			return 0, err
		}
		if memImage != "" {
			return r.cfg.Runtime.Restore(ctx, spec, memImage)
		}
		return r.cfg.Runtime.Start(ctx, spec)
	}
	if memImage == "" && r.booting != nil {
		undo.Add(r.booting(sb))
	}
	t0 := time.Now()
	pid, err := launch()
	if errdefs.Is(err, api.CodeNetworkUnavailable) {
		return err
	}
	if err != nil {
		// A container left by a crash or a failed stop has the same id:
		// remove it and try once more.
		if r.cfg.Runtime.Delete(ctx, name) == nil {
			pid, err = launch()
		}
		if err != nil && memImage != "" && sb.MemoryBytes > 0 {
			// Saved by a container started before cairn sized /tmp: its
			// mounts are what the resume must match. If that fails too,
			// the first error is the one that says why.
			first := err
			spec.Options.RuntimeTmp = true
			if r.cfg.Runtime.Delete(ctx, name) == nil {
				if pid, err = launch(); err == nil {
					slog.Info("resumed a memory image saved before /tmp was sized; /tmp keeps gVisor's size until the sandbox boots again", "sandbox", sb.Name)
				}
			}
			if err != nil {
				err = first
			}
		}
		if err != nil && memImage != "" {
			return errdefs.Wrap(api.CodeMemoryImageBad, err, "resume sandbox %s from its memory image", sb.Name)
		}
		if err != nil {
			return errdefs.Wrap(api.CodeRuntimeFailed, err, "start sandbox %s", sb.Name)
		}
	}
	undo.Add(func() { logErr("undo: delete container", r.cfg.Runtime.Delete(context.Background(), name)) })
	wctx, cancel := context.WithTimeout(ctx, agentStartTimeout)
	defer cancel()
	launched := time.Now()
	if err := inst.agent.WaitConnected(wctx); err != nil {
		return errdefs.Wrap(api.CodeAgentUnreachable, err, "cairn-init in sandbox %s did not answer within %s (see %s)", sb.Name, agentStartTimeout, spec.LogPath)
	}
	slog.Debug("container started", "sandbox", sb.Name, "container", name, "from_memory", memImage != "",
		"runsc", launched.Sub(t0).Round(time.Millisecond), "agent", time.Since(launched).Round(time.Millisecond))
	inst.pid, inst.container, inst.network = pid, name, netMode
	r.watch(sb, inst) // before put: a close once it is shared ends the watch too
	r.cfg.Instances.put(sb.ID, inst)
	undo.Success()
	r.lazyStarted(sb.ID)
	if r.started != nil {
		r.started(sb)
	}
	return nil
}

// stopContainer ends the sandbox's processes: gracefully through cairn-init
// if it answers, else by force, and removes the container.
func (r *runner) stopContainer(ctx context.Context, sb metadata.Sandbox) error {
	inst, name := r.detach(sb.ID)

	sctx, cancel := context.WithTimeout(ctx, stopTimeout)
	defer cancel()
	graceful := false
	if inst != nil {
		// Right after a memory checkpoint cairn-init's connection is broken
		// and it has not noticed yet (its keepalive will, within a second):
		// a graceful stop is worth that wait, SIGTERM and gVisor winding
		// down by itself take longer.
		wctx, cancel := context.WithTimeout(sctx, reconnectWait)
		inst.agent.WaitConnected(wctx)
		cancel()
		if inst.agent.Connected() {
			// cairn-init answers once every process has exited (SIGTERM,
			// then SIGKILL after the grace) and it has synced.
			err := inst.agent.Shutdown(sctx, stopGrace)
			logErr("graceful shutdown", err, "sandbox", sb.Name)
			graceful = err == nil
		}
		inst.close()
	}
	if !graceful {
		logErr("SIGTERM", r.cfg.Runtime.Kill(sctx, name, syscall.SIGTERM), "sandbox", sb.Name)
		if err := r.cfg.Runtime.WaitStopped(sctx, name); err != nil {
			slog.Warn("sandbox did not stop in time; forcing", "sandbox", sb.Name)
		}
	}
	// Nothing runs inside any more; removing the container now saves the
	// second or two gVisor takes to wind down by itself.
	if err := r.cfg.Runtime.Delete(context.WithoutCancel(ctx), name); err != nil {
		return errdefs.Wrap(api.CodeRuntimeFailed, err, "stop sandbox %s", sb.Name)
	}
	r.lazyStopped(sb.ID)
	return nil
}

// waitReady returns the agent of a running sandbox, waiting while a
// lifecycle operation (start, restart, later restore) is in progress. A
// crashed sandbox, or one whose cairn-init stays unconnected for
// agentConnectWait, fails at once with S10.
func (r *runner) waitReady(ctx context.Context, sb metadata.Sandbox) (*agent.Host, error) {
	ctx, cancel := context.WithTimeout(ctx, execReadyTimeout)
	defer cancel()
	for {
		inst, changed := r.cfg.Instances.watch(sb.ID)
		_, busy := r.cfg.Leases.BusyState(ctx, sb.ID)
		if !busy {
			if inst == nil {
				if cur, err := r.cfg.Store.SandboxByID(ctx, sb.ID); err == nil && cur.State == metadata.SandboxCrashed {
					return nil, r.downError(ctx, sb)
				}
				return nil, errdefs.New(api.CodeNotRunning, "sandbox %s is not running (start it with `cairn start %s`)", sb.Name, sb.Name)
			}
			if inst.agent.Connected() {
				return inst.agent, nil
			}
			// Right after a memory checkpoint cairn-init dials again
			// within a second; one that stays away is down.
			wctx, cancel := context.WithTimeout(ctx, agentConnectWait)
			err := inst.agent.WaitConnected(wctx)
			cancel()
			switch {
			case err == nil:
				return inst.agent, nil
			case errors.Is(err, agent.ErrClosed), r.cfg.Instances.get(sb.ID) != inst:
				continue // it died or was replaced meanwhile: look again
			case ctx.Err() != nil:
				return nil, errdefs.Wrap(api.CodeSandboxBusy, ctx.Err(), "sandbox %s stayed busy", sb.Name)
			}
			return nil, r.downError(ctx, sb)
		}
		select {
		case <-changed:
		case <-time.After(busyPoll): // the holder may be another process
		case <-ctx.Done():
			return nil, errdefs.Wrap(api.CodeSandboxBusy, ctx.Err(), "sandbox %s stayed busy", sb.Name)
		}
	}
}

// agentConnectWait is how long an exec waits for the cairn-init of a
// running sandbox that is not connected before it fails with S10.
const agentConnectWait = 10 * time.Second

// openSockets opens a sandbox's two host sockets: the agent socket that
// cairn-init dials, and the management socket that processes inside reach
// at /.cairn/api.sock, served by the handler from Config.SandboxAPI. It
// also refreshes /.cairn/llm.txt.
func (r *runner) openSockets(sb metadata.Sandbox) (*instance, error) {
	dot := filepath.Join(r.sandboxDir(sb.ID), "dotcairn")
	if err := os.MkdirAll(dot, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dot, "llm.txt"), llmText, 0o444); err != nil {
		return nil, err
	}
	host, err := agent.Listen(r.agentSocket(sb.ID), r.agentKeyFile(sb.ID))
	if err != nil {
		return nil, err
	}
	inst := &instance{agent: host}
	if r.cfg.SandboxAPI == nil {
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
	// Bounded: the processes inside are untrusted, and every connection
	// costs cairnd a descriptor (see package httpedge).
	lim := httpedge.Sandbox("sandbox " + sb.Name)
	inst.api = httpedge.NewServer(r.cfg.SandboxAPI(sb.ID), lim)
	go func() {
		if err := inst.api.Serve(httpedge.Listen(ln, lim)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Warn("management socket", "sandbox", sb.Name, "err", err)
		}
	}()
	return inst, nil
}

// agentKey records the key the sandbox's cairn-init will prove itself
// with, in the sandbox's host directory (never in dotcairn, which the
// sandbox sees): for a boot a fresh one, returned as the line cairn-init
// reads on its standard input; for a resume from memImage the keys saved
// with the image, which the resumed cairn-init still holds (it is re-keyed
// when it connects). An image without keys was made by an earlier cairn
// whose cairn-init cannot prove itself: the sandbox boots from its disk
// instead, and memImage comes back "".
func (r *runner) agentKey(sb metadata.Sandbox, memImage string) (string, []byte, error) {
	keyFile := r.agentKeyFile(sb.ID)
	if err := os.MkdirAll(filepath.Dir(keyFile), 0o755); err != nil {
		return "", nil, err
	}
	if memImage != "" {
		err := agent.InheritKeyFile(memImage, keyFile)
		if err == nil {
			return memImage, nil, nil
		}
		if !errors.Is(err, agent.ErrNoImageKey) {
			return "", nil, errdefs.Wrap(api.CodeMemoryImageBad, err, "resume sandbox %s from its memory image", sb.Name)
		}
		slog.Warn("memory image from an earlier cairn: its cairn-init cannot prove itself; booting from the disk alone", "sandbox", sb.Name, "image", memImage)
	}
	key, err := agent.NewKeyFile(keyFile)
	if err != nil {
		return "", nil, err
	}
	return "", []byte(key.String() + "\n"), nil
}

// rename gives a sandbox resumed from another's memory its own hostname:
// the kernel state came from the checkpoint, hostname included.
func (r *runner) rename(ctx context.Context, sb metadata.Sandbox) {
	inst := r.cfg.Instances.get(sb.ID)
	if inst == nil {
		return
	}
	if err := inst.agent.SetHostname(ctx, sb.Name); err != nil {
		slog.Warn("set hostname of resumed copy", "sandbox", sb.Name, "err", err)
	}
}

func (r *runner) sandboxDir(id string) string {
	return filepath.Join(r.cfg.DataDir, "sandboxes", id)
}

func (r *runner) agentSocket(id string) string {
	return filepath.Join(r.sandboxDir(id), "dotcairn", "agent.sock")
}

// agentKeyFile records the key of the sandbox's cairn-init (agent.Host
// re-keys through it); outside dotcairn, unseen by the sandbox.
func (r *runner) agentKeyFile(id string) string {
	return filepath.Join(r.sandboxDir(id), "agent.key")
}

// isLive reports whether cairnd runs sandbox id.
func (r *runner) isLive(id string) bool {
	return r.cfg.Instances.get(id) != nil
}

// settleContainers returns the container of sandbox sb to take over, of
// those named after it (see container.go): the newest that runs or is
// paused, the others deleted (a crash in the middle of a restore in place
// leaves the killed one). With none, the sandbox id.
func (r *runner) settleContainers(ctx context.Context, sb metadata.Sandbox, names []string) string {
	if len(names) <= 1 {
		if len(names) == 1 {
			return names[0]
		}
		return sb.ID
	}
	keep, keepGen := "", int64(-1)
	for _, name := range names {
		st, _, err := r.cfg.Runtime.State(ctx, name)
		if _, gen := sandboxOfContainer(name); err == nil && (st == container.Running || st == container.Paused) && gen > keepGen {
			keep, keepGen = name, gen
		}
	}
	for _, name := range names {
		if name != keep {
			slog.Info("recover: deleting a replaced container", "sandbox", sb.Name, "container", name)
			logErr("recover: delete replaced container", r.cfg.Runtime.Delete(ctx, name), "sandbox", sb.Name)
		}
	}
	if keep == "" {
		return sb.ID
	}
	return keep
}

// sweep removes the containers, root subvolumes, host directories and
// browse views of sandboxes that have no committed row (checkpoint disks
// are the disks component's; a restore's staging is in the pool's work
// area, swept when it opens). It returns the names of the remaining
// containers by sandbox id.
func (r *runner) sweep(ctx context.Context, known map[string]bool) (map[string][]string, error) {
	// Starts a killed cairnd left under way would make containers after
	// the list below.
	if _, err := r.cfg.Runtime.SettleLaunches(ctx); err != nil {
		return nil, err
	}
	names, err := r.cfg.Runtime.List(ctx)
	if err != nil {
		return nil, err
	}
	containers := map[string][]string{}
	for _, name := range names {
		if id, _ := sandboxOfContainer(name); known[id] {
			containers[id] = append(containers[id], name)
			continue
		}
		slog.Info("recover: deleting orphan container", "id", name)
		if err := r.cfg.Runtime.Delete(ctx, name); err != nil {
			return nil, err
		}
	}
	// Checkpoint disks and memory images are the disks component's to
	// sweep (disks.Sweep, before Recover); here the sandboxes' own: their
	// roots, host directories and browse views.
	r.sweepLazy(known)
	roots, err := r.cfg.Pool.RootNames()
	if err != nil {
		return nil, err
	}
	for _, id := range roots {
		if !known[id] {
			slog.Info("recover: removing an orphan sandbox root", "sandbox", id)
			if err := r.cfg.Pool.Delete(ctx, r.cfg.Pool.SandboxPath(id)); err != nil {
				return nil, err
			}
		}
	}
	dirs, err := os.ReadDir(filepath.Join(r.cfg.DataDir, "sandboxes"))
	if err != nil {
		return nil, err
	}
	for _, e := range dirs {
		if !known[e.Name()] {
			slog.Info("recover: removing orphan sandbox files", "sandbox", e.Name())
			if err := os.RemoveAll(r.sandboxDir(e.Name())); err != nil {
				return nil, err
			}
			logErr("recover: remove an orphan browse view", r.cfg.Disks.Unpublish(e.Name()))
		}
	}
	return containers, nil
}

// settingsEnv is what cairn-init's environment gets of the sandbox's own
// settings as they are at its start: the defaults of its services, after
// the image's (initd/user.go). Execs get them from cairnd as they are
// when the exec starts (withSettings).
func settingsEnv(set metadata.SandboxSettings) []string {
	var env []string
	if len(set.Env) > 0 {
		b, _ := json.Marshal(set.Env)
		env = append(env, "CAIRN_SANDBOX_ENV="+string(b))
	}
	if set.Workdir != "" {
		env = append(env, "CAIRN_SANDBOX_WORKDIR="+set.Workdir)
	}
	if set.User != "" {
		env = append(env, "CAIRN_SANDBOX_USER="+set.User)
	}
	return env
}

// imageEnv is what cairn-init's environment gets of an image's config:
// its Env (which every command and service starts from), and its working
// directory and user, which cairn-init takes as the defaults of commands
// and services (initd/user.go) and does not pass on.
func imageEnv(cfg metadata.ImageConfig) []string {
	var env []string
	for _, kv := range cfg.Env {
		// CAIRN_* is cairn's own (the memory limit cairn-init holds the
		// sandbox to): an image does not set it.
		if k, _, ok := strings.Cut(kv, "="); ok && k != "" && !strings.HasPrefix(k, "CAIRN_") {
			env = append(env, kv)
		}
	}
	if cfg.WorkingDir != "" {
		env = append(env, "CAIRN_IMAGE_WORKDIR="+cfg.WorkingDir)
	}
	if cfg.User != "" {
		env = append(env, "CAIRN_IMAGE_USER="+cfg.User)
	}
	return env
}
