package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
	"github.com/cairn-sandbox/cairn/internal/accessorder"
)

// Goals of the lazy group (issue 20).
const goalLazyFirstExec = 2 * time.Second

var (
	lazyGiB    = flag.Float64("lazy-gib", 1, "lazy: size of the off-site-only checkpoint's data, GiB (the issue's figure is 5)")
	lazyRounds = flag.Int("lazy-rounds", 2, "lazy: rounds (each: two lazy restores, with and without prefetch, one whole, one restic restore); at most -n")
)

const (
	lazyPort = 8080
	// lazyBootReads is the source cairnd's --boot-reads: short, so that
	// the order of the source's boot is written soon after it, and long
	// enough for its service to start on a loaded machine.
	lazyBootReads = 15 * time.Second
	lazySource    = "src"
	// lazyService reads every file of the application, then answers. At
	// the source's recorded boot only (lazySourceMark exists there, not in
	// the checkpoints) it waits first: cairnd starts recording a boot's
	// reads once the sandbox has started, which is after cairn-init has
	// started its services, and would miss their first reads.
	lazyService    = `{"name":"web","cmd":["sh","-c","[ -e /etc/cairn-bench-source ] && sleep 3; cat /srv/zzapp/lib/* > /dev/null && exec httpd -f -p 127.0.0.1:8080 -h /srv/zzapp/www"],"restart":"always"}`
	lazySourceMark = "/etc/cairn-bench-source"
)

// lazyEnv is the group's temp dir, S3 servers and cairnd.
type lazyEnv struct {
	dir    string
	s3     [2]*s3Server // cairnd's two off-site locations
	restic *s3Server
	d      *benchDaemon
	c      *client.Client
	pool   string
	srcID  string
	tree   lazyTree
	withPF string // checkpoint whose manifest carries the boot's read order
	noPF   string // the same tree, uploaded without one
	// resticSrc is a read-only snapshot of the source's root taken right
	// after withPF: the tree restic backs up and restores.
	resticSrc string
}

// lazyRun is one restore, timed from its request.
type lazyRun struct {
	running   time.Duration // the restore operation is done: the sandbox runs
	exec      time.Duration // the first `exec true` answered
	web       time.Duration // the service answered its first request
	fill      time.Duration // every byte is in (lazy only)
	filledPct float64       // of the data in when exec true answered
	ordered   bool          // cairnd logged that the fill follows a recorded order
	fetched   int64         // bytes the S3 servers sent, until the end of the fill
}

// benchLazy measures issue 20: a lazy restore of an off-site-only
// checkpoint of a mixed tree until the first exec answers, until a web
// service in it (which reads its application files first) answers with
// and without prefetch in access order, until the whole fill; and a whole
// restore of the same checkpoint against `restic restore` of the same tree
// from the same kind of S3 server.
func benchLazy(ctx context.Context, e *env) (err error) {
	size := int64(*lazyGiB * (1 << 30))
	if size < 64<<20 {
		return errors.New("-lazy-gib: at least 0.0625")
	}
	rounds := max(1, min(e.n, *lazyRounds))
	dir, err := os.MkdirTemp("", "cairn-bench-lazy-")
	if err != nil {
		return err
	}
	l := &lazyEnv{dir: dir}
	defer func() {
		if cerr := l.close(ctx); cerr != nil && err == nil {
			err = cerr
		}
	}()
	for i := range l.s3 {
		if l.s3[i], err = startS3Server(ctx, filepath.Join(dir, fmt.Sprintf("s3-%d", i))); err != nil {
			return err
		}
		if err := l.s3[i].makeBucket(ctx, "cairn"); err != nil {
			return err
		}
	}
	if l.restic, err = startS3Server(ctx, filepath.Join(dir, "s3-restic")); err != nil {
		return err
	}
	config, err := l.config()
	if err != nil {
		return err
	}
	// Room for the source, two restored copies at a time and a margin.
	poolFlag := fmt.Sprintf("%dG", 3*(size>>30)+8)
	if l.d, err = startDaemonWith(ctx, e.binDir, e.runsc, config, "--pool-size", poolFlag,
		"--boot-reads", lazyBootReads.String()); err != nil {
		return fmt.Errorf("cairnd with off-site locations: %w", err)
	}
	l.c, l.pool = l.d.client, l.d.poolDir()

	fmt.Printf("== lazy restore of an off-site-only checkpoint (%s of data); rounds: %d\n\n", mib(size), rounds)
	t0 := time.Now()
	if err := l.prepare(ctx, size); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	files, total := l.tree.total()
	fmt.Printf("  (tree: %s in %d files: %s; the sandbox's root adds busybox's image)\n", mib(total), files, l.tree.describe())
	fmt.Printf("  (set-up: written, booted again, checkpointed, uploaded to both locations, local copies dropped, restic backup: %s)\n",
		time.Since(t0).Round(time.Second))
	fmt.Println("  (cairnd with two off-site locations, each a versitygw (posix) on loopback behind a counting proxy, and the")
	fmt.Println("   local tier keep_newest 1: the checkpoints measured are `off-site only`; restic has a versitygw of its own;")
	fmt.Printf("   the service, started at boot, runs `cat %s/lib/* > /dev/null` and then busybox httpd; \"answers\" is the\n", lazyAppDir)
	fmt.Println("   first `cairn exec NEW -- wget -q -O- http://127.0.0.1:8080/` (polled back to back) that returns the page;")
	fmt.Println("   with prefetch: the checkpoint uploaded with the source's boot reads (--boot-reads 15s); without: a")
	fmt.Println("   checkpoint of the same tree, uploaded once access-order.json was deleted (same chunks, same packs);")
	fmt.Println("   at the recorded boot only, the service waits 3 s before it reads: cairnd records from the sandbox's start,")
	fmt.Println("   after cairn-init started its services; each restored sandbox and its final checkpoint are deleted after it;")
	fmt.Println("   page cache warm for both tools (the S3 servers' files were just written); sync before each restore)")
	fmt.Println()

	var withPF, noPF, whole, resticRestore []lazyRun
	for i := range rounds {
		lazySteps := []func() error{
			func() error {
				r, err := l.lazyRestore(ctx, l.withPF, fmt.Sprintf("pf%d", i))
				withPF = append(withPF, r)
				return err
			},
			func() error {
				r, err := l.lazyRestore(ctx, l.noPF, fmt.Sprintf("nopf%d", i))
				noPF = append(noPF, r)
				return err
			},
			func() error {
				r, err := l.wholeRestore(ctx, fmt.Sprintf("whole%d", i))
				whole = append(whole, r)
				return err
			},
			func() error {
				d, err := l.resticRestore(ctx, i)
				resticRestore = append(resticRestore, d)
				return err
			},
		}
		if i%2 == 1 {
			lazySteps[0], lazySteps[1] = lazySteps[1], lazySteps[0]
			lazySteps[2], lazySteps[3] = lazySteps[3], lazySteps[2]
		}
		for _, step := range lazySteps {
			if err := step(); err != nil {
				return fmt.Errorf("round %d: %w", i+1, err)
			}
		}
	}
	reportLazy(total, withPF, noPF, whole, resticRestore)
	return nil
}

// config is cairnd's config: the account's two locations and a local tier
// that keeps only the newest checkpoint's local copy once it is off-site.
func (l *lazyEnv) config() (string, error) {
	var locs []map[string]any
	for i, s := range l.s3 {
		locs = append(locs, map[string]any{"name": fmt.Sprintf("loc%d", i), "s3": map[string]any{
			"endpoint": s.endpoint(), "bucket": "cairn", "access_key": s.accessKey, "secret_key": s.secretKey}})
	}
	b, err := json.Marshal(map[string]any{"accounts": map[string]any{"default": map[string]any{
		"offsite": map[string]any{"retry_max": "2s", "locations": locs},
		"local":   map[string]any{"keep_newest": 1, "keep_for": "-1s"}}}})
	return string(b), err
}

// prepare makes the source sandbox with the tree and the service, boots it
// again so that its service reads the application from the disk while
// cairnd records the order, takes the checkpoint with prefetch, then (its
// order deleted) the one without, and a later one, and waits until both
// measured ones are off-site only; then backs the tree up with restic.
func (l *lazyEnv) prepare(ctx context.Context, size int64) error {
	c := l.c
	if err := createQuiet(ctx, c, lazySource); err != nil {
		return err
	}
	sb, err := c.Sandbox(ctx, lazySource)
	if err != nil {
		return err
	}
	l.srcID = sb.ID
	pr, pw := io.Pipe()
	go func() {
		var err error
		l.tree, err = writeLazyTree(pw, size)
		pw.CloseWithError(err)
	}()
	var stderr bytes.Buffer
	st, err := c.Exec(ctx, lazySource, api.ExecRequest{Command: []string{"tar", "-x", "-f", "-", "-C", "/"}, Stdin: true},
		client.ExecIO{Stdin: pr, Stderr: &stderr})
	pr.CloseWithError(io.ErrClosedPipe)
	if err != nil {
		return fmt.Errorf("tar -x: %w", err)
	}
	if st.Code != 0 {
		return fmt.Errorf("tar -x exited %d: %s", st.Code, trimOut(stderr.Bytes()))
	}
	def := strings.ReplaceAll(lazyService, `"`, `\"`)
	if _, err := execSh(ctx, c, lazySource, `mkdir -p /etc/cairn/services && printf '%s\n' "`+def+`" > /etc/cairn/services/web.json && touch `+lazySourceMark+` && sync`); err != nil {
		return err
	}
	// The boot that wrote the tree has it in gVisor's memory; a new boot
	// reads it from the disk, where cairnd sees the reads.
	booted := time.Now()
	for _, f := range []func(context.Context, string) (api.Operation, error){
		func(ctx context.Context, name string) (api.Operation, error) {
			return c.StopSandbox(ctx, name, api.StopRequest{})
		}, c.StartSandbox,
	} {
		op, err := f(ctx, lazySource)
		if err != nil {
			return err
		}
		if _, err := c.Follow(ctx, op, nil); err != nil {
			return err
		}
	}
	if _, err := waitWeb(ctx, c, lazySource, booted, 2*time.Minute); err != nil {
		return err
	}
	orderPath := accessorder.PathFor(l.d.dataDir, l.srcID)
	for deadline := time.Now().Add(lazyBootReads + time.Minute); ; time.Sleep(200 * time.Millisecond) {
		o, err := accessorder.Load(orderPath)
		if err == nil && slices.Contains(o.Files, "srv/zzapp/lib/mod-000.bin") {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no boot order naming the application at %s (%d files: %.200q; %v)", orderPath, len(o.Files), o.Files, err)
		}
	}
	if _, err := execSh(ctx, c, lazySource, "rm "+lazySourceMark+" && sync"); err != nil {
		return err
	}
	ck, err := l.checkpoint(ctx)
	if err != nil {
		return err
	}
	l.withPF = ck
	l.resticSrc = filepath.Join(l.pool, "tmp", "lazy-restic-src")
	if err := btrfs(ctx, "subvolume", "snapshot", "-r", filepath.Join(l.pool, "sandboxes", l.srcID), l.resticSrc); err != nil {
		return err
	}
	if err := l.waitOffsite(ctx, l.withPF, func(ck api.Checkpoint) bool { return ck.Offsite == "uploaded ×2" }); err != nil {
		return err
	}
	if err := os.Remove(orderPath); err != nil {
		return err
	}
	if l.noPF, err = l.checkpoint(ctx); err != nil {
		return err
	}
	if _, err := execSh(ctx, c, lazySource, "echo later > /root/later && sync"); err != nil {
		return err
	}
	last, err := l.checkpoint(ctx)
	if err != nil {
		return err
	}
	for _, id := range []string{l.withPF, l.noPF} {
		if err := l.waitOffsite(ctx, id, func(ck api.Checkpoint) bool { return ck.Stored == api.StoredOffsiteOnly }); err != nil {
			return err
		}
	}
	// Its upload must not run during the measurements.
	if err := l.waitOffsite(ctx, last, func(ck api.Checkpoint) bool { return ck.Offsite == "uploaded ×2" }); err != nil {
		return err
	}
	// The source stops: its service has nothing to do with what is
	// measured, and its disk stays.
	op, err := c.StopSandbox(ctx, lazySource, api.StopRequest{})
	if err != nil {
		return err
	}
	if _, err := c.Follow(ctx, op, nil); err != nil {
		return err
	}
	return l.resticBackup(ctx)
}

func (l *lazyEnv) checkpoint(ctx context.Context) (string, error) {
	op, err := l.c.CreateCheckpoint(ctx, lazySource, api.CreateCheckpointRequest{Comment: "bench lazy"})
	if err != nil {
		return "", err
	}
	ck, err := l.c.WaitCheckpoint(ctx, op, nil)
	return ck.ID, err
}

// waitOffsite waits until checkpoint id of the source satisfies ok.
func (l *lazyEnv) waitOffsite(ctx context.Context, id string, ok func(api.Checkpoint) bool) error {
	deadline := time.Now().Add(20 * time.Minute)
	for {
		ck, err := l.c.Checkpoint(ctx, lazySource, id)
		if err != nil {
			return err
		}
		if ok(ck) {
			return nil
		}
		if ck.Offsite == api.OffsiteFailed || ck.Offsite == api.OffsiteUnstorable {
			return fmt.Errorf("checkpoint %s: off-site %s", id, ck.Offsite)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("checkpoint %s: still off-site %q, stored %q", id, ck.Offsite, ck.Stored)
		}
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
}

// received is what cairnd's S3 servers have sent so far.
func (l *lazyEnv) received() int64 {
	var n int64
	for _, s := range l.s3 {
		_, down := s.proxy.sent()
		n += down
	}
	return n
}

// lazyRestore restores checkpoint id lazily as name, times it, and deletes
// the sandbox again.
func (l *lazyEnv) lazyRestore(ctx context.Context, id, name string) (r lazyRun, err error) {
	c := l.c
	if err := l.quiet(ctx); err != nil {
		return r, err
	}
	syscall.Sync()
	logOff := l.d.logSize()
	recv0 := l.received()
	t0 := time.Now()
	op, err := c.RestoreCheckpoint(ctx, lazySource, id, api.RestoreRequest{As: name})
	if err != nil {
		return r, err
	}
	defer func() {
		if derr := l.remove(context.WithoutCancel(ctx), name); derr != nil && err == nil {
			err = derr
		}
	}()
	// The fill is watched from the start: it may end before the service
	// answers.
	filled := make(chan time.Duration, 1)
	fillCtx, stopFill := context.WithCancel(ctx)
	defer stopFill()
	go func() {
		for fillCtx.Err() == nil {
			if sb, err := c.Sandbox(fillCtx, name); err == nil && sb.State == api.StateRunning && (sb.Fill == nil || sb.Fill.Done == sb.Fill.Total) {
				filled <- time.Since(t0)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	if _, err := c.WaitSandbox(ctx, op, nil); err != nil {
		return r, err
	}
	r.running = time.Since(t0)
	if r.exec, err = firstExec(ctx, c, name, t0); err != nil {
		return r, err
	}
	if sb, err := c.Sandbox(ctx, name); err == nil && sb.Fill != nil && sb.Fill.Total > 0 {
		r.filledPct = 100 * float64(sb.Fill.Done) / float64(sb.Fill.Total)
	} else if err == nil {
		r.filledPct = 100
	}
	if r.web, err = waitWeb(ctx, c, name, t0, 10*time.Minute); err != nil {
		return r, err
	}
	select {
	case r.fill = <-filled:
	case <-time.After(30 * time.Minute):
		return r, errors.New("the fill did not end in 30 min")
	case <-ctx.Done():
		return r, ctx.Err()
	}
	r.ordered = strings.Contains(l.d.logSince(logOff), "fetching first the files its sandbox read first")
	r.fetched = l.received() - recv0
	return r, nil
}

// wholeRestore restores the checkpoint with prefetch whole (its local copy
// is gone: from off-site) as name, times it, and deletes the sandbox.
func (l *lazyEnv) wholeRestore(ctx context.Context, name string) (r lazyRun, err error) {
	c := l.c
	if err := l.quiet(ctx); err != nil {
		return r, err
	}
	syscall.Sync()
	recv0 := l.received()
	t0 := time.Now()
	op, err := c.RestoreCheckpoint(ctx, lazySource, l.withPF, api.RestoreRequest{As: name, FromOffsite: true, Whole: true})
	if err != nil {
		return r, err
	}
	defer func() {
		if derr := l.remove(context.WithoutCancel(ctx), name); derr != nil && err == nil {
			err = derr
		}
	}()
	if _, err := c.WaitSandbox(ctx, op, nil); err != nil {
		return r, err
	}
	r.running = time.Since(t0)
	r.fetched = l.received() - recv0
	if r.exec, err = firstExec(ctx, c, name, t0); err != nil {
		return r, err
	}
	r.web, err = waitWeb(ctx, c, name, t0, 10*time.Minute)
	r.fill, r.filledPct = r.running, 100
	return r, err
}

// remove deletes sandbox name and the checkpoints cairnd keeps of it
// (the final one a delete takes, which would be uploaded during the next
// measurements and hold its data in the pool), and waits until btrfs has
// reclaimed them, so that the cleaner does not run in the next
// measurement either.
func (l *lazyEnv) remove(ctx context.Context, name string) error {
	if err := deleteSandbox(ctx, l.c, name); err != nil {
		return err
	}
	cks, err := l.c.Snapshots(ctx)
	if err != nil {
		return err
	}
	for _, ck := range cks {
		if ck.Sandbox != name || !ck.SandboxDeleted {
			continue
		}
		for try := 0; ; try++ {
			_, err := l.c.DeleteSnapshot(ctx, ck.GlobalID)
			if err == nil || client.CodeOf(err) == api.CodeNoCheckpoint {
				break
			}
			if try == 50 || ctx.Err() != nil {
				return fmt.Errorf("delete checkpoint %s of deleted sandbox %s: %w", ck.GlobalID, name, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return waitAllCleaned(ctx, l.pool)
}

// quiet waits until no upload is queued or running, so that none runs in
// the measurement that follows.
func (l *lazyEnv) quiet(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		cks, err := l.c.Snapshots(ctx)
		if err != nil {
			return err
		}
		busy := ""
		for _, ck := range cks {
			if ck.Offsite == api.OffsitePending || ck.Offsite == api.OffsiteUploading {
				busy = ck.Sandbox + "/" + ck.ID
			}
		}
		if busy == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the upload of %s still runs after 10 min", busy)
		}
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
}

// waitAllCleaned waits until btrfs' cleaner has dropped every deleted
// subvolume of the pool (see waitCleaned).
func waitAllCleaned(ctx context.Context, pool string) error {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		out, err := exec.CommandContext(ctx, "btrfs", "subvolume", "list", "-d", pool).CombinedOutput()
		if err != nil {
			return fmt.Errorf("btrfs subvolume list -d %s: %v: %s", pool, err, trimOut(out))
		}
		if strings.TrimSpace(string(out)) == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("deleted subvolumes of %s still not cleaned after 3 minutes: %s", pool, trimOut(out))
		}
		if err := btrfs(ctx, "filesystem", "sync", pool); err != nil {
			return err
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// firstExec runs `exec true` in name until it answers; the time since t0.
func firstExec(ctx context.Context, c *client.Client, name string, t0 time.Time) (time.Duration, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		err := execTrue(ctx, c, name)
		if err == nil {
			return time.Since(t0), nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, fmt.Errorf("exec true in %s: %w", name, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitWeb polls the service of sandbox name, back to back, until it
// answers with its page; the time since t0.
func waitWeb(ctx context.Context, c *client.Client, name string, t0 time.Time, within time.Duration) (time.Duration, error) {
	deadline := time.Now().Add(within)
	url := fmt.Sprintf("http://127.0.0.1:%d/", lazyPort)
	for {
		var out bytes.Buffer
		st, err := c.Exec(ctx, name, api.ExecRequest{Command: []string{"wget", "-q", "-O-", url}}, client.ExecIO{Stdout: &out, Stderr: io.Discard})
		if err == nil && st.Code == 0 && out.String() == lazyPage {
			return time.Since(t0), nil
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the service of %s did not answer in %v (last: exit %d, %v)", name, within, st.Code, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// --- restic ---

func (l *lazyEnv) resticRepo() *resticRepo {
	r := &resticRepo{srv: l.restic, bucket: "restic", cache: filepath.Join(l.dir, "restic-cache")}
	r.env = append(os.Environ(),
		"RESTIC_REPOSITORY=s3:http://"+l.restic.endpoint()+"/restic",
		"RESTIC_PASSWORD=bench passphrase",
		"RESTIC_CACHE_DIR="+r.cache,
		"AWS_ACCESS_KEY_ID="+l.restic.accessKey,
		"AWS_SECRET_ACCESS_KEY="+l.restic.secretKey,
	)
	return r
}

// resticBackup backs the snapshot of the source's root up (not timed).
func (l *lazyEnv) resticBackup(ctx context.Context) error {
	if err := l.restic.makeBucket(ctx, "restic"); err != nil {
		return err
	}
	r := l.resticRepo()
	if _, err := r.run(ctx, "init"); err != nil {
		return err
	}
	_, err := r.run(ctx, "backup", "--quiet", "--host", "bench", l.resticSrc)
	return err
}

// resticRestore times `restic restore` of the tree into a new directory
// of the pool (the same file system cairn restores into), then removes it.
func (l *lazyEnv) resticRestore(ctx context.Context, round int) (lazyRun, error) {
	target := filepath.Join(l.pool, "tmp", fmt.Sprintf("lazy-restic-%d", round))
	defer os.RemoveAll(target)
	r := l.resticRepo()
	syscall.Sync()
	_, down0 := l.restic.proxy.sent()
	t0 := time.Now()
	if _, err := r.run(ctx, "restore", "latest", "--host", "bench", "--target", target); err != nil {
		return lazyRun{}, err
	}
	_, down1 := l.restic.proxy.sent()
	d := lazyRun{running: time.Since(t0), fetched: down1 - down0}
	// Its files are checked: the restore wrote the application's page.
	page, err := os.ReadFile(filepath.Join(target, l.resticSrc, "srv/zzapp/www/index.html"))
	if err != nil || string(page) != lazyPage {
		return lazyRun{}, fmt.Errorf("restic restore: the tree's page: %q, %v", page, err)
	}
	return d, nil
}

// close stops cairnd (deleting its sandboxes) and the S3 servers and
// removes the temp dir.
func (l *lazyEnv) close(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	var err error
	if l.resticSrc != "" {
		if e := exec.CommandContext(ctx, "btrfs", "subvolume", "delete", l.resticSrc).Run(); e != nil {
			err = fmt.Errorf("btrfs subvolume delete %s: %w", l.resticSrc, e)
		}
	}
	if l.d != nil {
		if e := l.d.stop(); e != nil {
			err = e
		}
	}
	for _, s := range []*s3Server{l.s3[0], l.s3[1], l.restic} {
		if s != nil {
			s.stop()
		}
	}
	if e := unmount(ctx, l.dir); e != nil {
		return fmt.Errorf("left %s: %w", l.dir, e)
	}
	if e := os.RemoveAll(l.dir); e != nil && err == nil {
		err = e
	}
	return err
}

// --- report ---

func reportLazy(total int64, withPF, noPF, whole, restic []lazyRun) {
	pick := func(rs []lazyRun, f func(lazyRun) time.Duration) []time.Duration {
		var ds []time.Duration
		for _, r := range rs {
			ds = append(ds, f(r))
		}
		return ds
	}
	running := func(r lazyRun) time.Duration { return r.running }
	execT := func(r lazyRun) time.Duration { return r.exec }
	web := func(r lazyRun) time.Duration { return r.web }
	fill := func(r lazyRun) time.Duration { return r.fill }
	all := append(append([]lazyRun(nil), withPF...), noPF...)

	fmt.Println("lazy restore (restore as new, --lazy), from the request")
	printSeries(series{"until the restore operation is done (sandbox running)", pick(all, running)})
	printSeries(series{"until the first `exec true` answers, with prefetch", pick(withPF, execT)})
	printSeries(series{"until the first `exec true` answers, without prefetch", pick(noPF, execT)})
	printSeries(series{"until the first `exec true` answers, both", pick(all, execT)})
	var pcts []string
	for _, r := range all {
		pcts = append(pcts, fmt.Sprintf("%.1f%%", r.filledPct))
	}
	fmt.Printf("  filled when it answered: %s\n", strings.Join(pcts, " / "))
	e50 := p50(pick(all, execT))
	goal(e50 <= goalLazyFirstExec, "first exec true after a lazy restore ≤ %v (p50 %s, p90 %s)", goalLazyFirstExec,
		round(e50), round(p90(pick(all, execT))))
	fmt.Println()

	compare("until the web service answers its first request (it reads 300 application files first)",
		series{"lazy, without prefetch (floor)", pick(noPF, web)},
		series{"lazy, with prefetch in access order", pick(withPF, web)})
	printSeries(series{"whole restore, for reference", pick(whole, web)})
	ordered := func(rs []lazyRun) string {
		var s []string
		for _, r := range rs {
			s = append(s, fmt.Sprint(r.ordered))
		}
		return strings.Join(s, "/")
	}
	fmt.Printf("  cairnd logged a fill in recorded order: with prefetch %s; without %s\n", ordered(withPF), ordered(noPF))
	w, n := p50(pick(withPF, web)), p50(pick(noPF, web))
	goal(w < n, "the service answers sooner with prefetch than without (%s against %s: %.2f×)", round(w), round(n), float64(w)/float64(n))
	fmt.Println()

	fmt.Println("until the whole fill is in (every byte of the checkpoint local)")
	printSeries(series{"lazy, with prefetch", pick(withPF, fill)})
	printSeries(series{"lazy, without prefetch", pick(noPF, fill)})
	f50 := p50(pick(all, fill))
	fmt.Printf("  %s in %s: %.0f MiB/s (p50)\n", mib(total), round(f50), float64(total)/(1<<20)/f50.Seconds())
	fmt.Printf("  fetched from the S3 servers until the fill's end (p50): with prefetch %s (%.2f× the data), without %s (%.2f×)\n",
		mib(medianFetched(withPF)), ratio(medianFetched(withPF), total), mib(medianFetched(noPF)), ratio(medianFetched(noPF), total))
	fmt.Println()

	compare("whole restore until the sandbox runs, against `restic restore` of the same tree (its own versitygw)",
		series{"restic restore (floor)", pick(restic, running)},
		series{"cairn, whole restore (restore as new from off-site)", pick(whole, running)})
	c50, r50 := p50(pick(whole, running)), p50(pick(restic, running))
	fmt.Printf("  fetched (p50): cairn %s, restic %s\n", mib(medianFetched(whole)), mib(medianFetched(restic)))
	fmt.Printf("  %s: cairn %.0f MiB/s, restic %.0f MiB/s (p50, data only)\n", mib(total),
		float64(total)/(1<<20)/c50.Seconds(), float64(total)/(1<<20)/r50.Seconds())
	goal(c50 <= r50, "whole restore at least as fast as restic restore (cairn %s, restic %s: %.2f×)", round(c50), round(r50), float64(c50)/float64(r50))
	fmt.Println()
}

func medianFetched(rs []lazyRun) int64 {
	var ds []time.Duration
	for _, r := range rs {
		ds = append(ds, time.Duration(r.fetched))
	}
	return int64(p50(ds))
}

func p90(ds []time.Duration) time.Duration {
	_, v := percentiles(ds)
	return v
}
