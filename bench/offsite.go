package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-sandbox/cairn/internal/repo"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/limit"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/retry"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/s3"
	"github.com/cairn-sandbox/cairn/internal/repo/crypto"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// Goals of the off-site group, printed next to the figures.
const (
	goalIncrementalSpeedup = 3.0 // restic's incremental p50 / cairn's
	// offsiteMaxRounds bounds the rounds (each uploads the 1 GiB tree
	// three times: cairn with one location, restic, cairn with two).
	offsiteMaxRounds = 3
	// offsitePoolSize is the size of the loop file holding the tree and
	// its snapshots (sparse: it takes what is written).
	offsitePoolSize = 4 << 30
)

// The backend wrappers of each location, as cairnd's (internal/offsite's
// callRetry and concurrentCalls).
var (
	offsiteCallRetry       = retry.Policy{Attempts: 3, Initial: 200 * time.Millisecond, Max: 2 * time.Second}
	offsiteConcurrentCalls = 4
)

var offsiteProfile = flag.String("offsite-cpuprofile", "",
	"offsite: write CPU profiles of cairn's backups in the last round to `PREFIX`-first.pprof and PREFIX-incremental.pprof")

// contender is one way of uploading the tree, measured every round.
type contender struct {
	name  string
	first []offsiteRun
	incr  []offsiteRun
}

// offsiteRun is one timed backup.
type offsiteRun struct {
	d        time.Duration
	open     time.Duration // cairn: Open of the repository, inside d
	read     time.Duration // cairn: from Open to the end of the walk (±100 ms, from Progress), inside d
	cpu      time.Duration // user+system CPU of the client
	server   time.Duration // user+system CPU of versitygw
	sent     int64         // client→server bytes through the proxy
	received int64         // server→client
	stored   stored        // the bucket(s) after the backup (incremental: growth)
	stats    repo.Stats    // cairn's
}

// offsiteEnv is the group's temp dir, servers, pool and tree.
type offsiteEnv struct {
	dir    string
	cairn  *s3Server    // cairn's buckets
	restic *s3Server    // restic's
	pool   *volume.Pool // a loop pool like cairnd's, at dir/pool
	view   string       // dir/view: where the snapshot being backed up is bind-mounted
	tree   *srcTree     // its root is the live subvolume, in the pool
}

// benchOffsite measures the off-site upload: cairn's internal/repo backing
// up a 1 GiB tree to an S3 server (versitygw on loopback) against restic
// backing up the same tree to another such server, first in full and then
// after 1% of the files changed; time, bytes stored, bytes sent. As in
// production, the tree is a btrfs subvolume of a loop pool, and what is
// backed up is a read-only snapshot of it (bind-mounted at one path, the
// same for both tools); cairn's incremental is given the snapshot its
// parent was made from as ParentDir.
func benchOffsite(ctx context.Context, e *env) (err error) {
	nRounds := min(e.n, offsiteMaxRounds)
	dir, err := os.MkdirTemp("", "cairn-bench-offsite-")
	if err != nil {
		return err
	}
	o := &offsiteEnv{dir: dir, view: filepath.Join(dir, "view")}
	defer func() {
		if cerr := o.close(ctx); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if o.cairn, err = startS3Server(ctx, filepath.Join(dir, "s3-cairn")); err != nil {
		return err
	}
	if o.restic, err = startS3Server(ctx, filepath.Join(dir, "s3-restic")); err != nil {
		return err
	}
	resticVersion, err := exec.CommandContext(ctx, "restic", "version").Output()
	if err != nil {
		return fmt.Errorf("restic version: %w", err)
	}
	if o.pool, err = volume.OpenLoop(ctx, dir, offsitePoolSize); err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	live := o.pool.TempPath("live")
	if err := o.pool.Create(ctx, live); err != nil {
		return err
	}
	if err := os.Mkdir(o.view, 0o700); err != nil {
		return err
	}
	t0 := time.Now()
	if o.tree, err = makeTree(ctx, live); err != nil {
		return fmt.Errorf("make tree: %w", err)
	}
	files, size := o.tree.total()
	fmt.Printf("== off-site upload: cairn (internal/repo) vs. %s; rounds: %d\n\n", strings.TrimSpace(string(resticVersion)), nRounds)
	fmt.Printf("  (tree: %s in %d files: %s; written in %s)\n", mib(size), files, o.tree.describe(), time.Since(t0).Round(100*time.Millisecond))
	fmt.Println("  (the tree is a btrfs subvolume on a loop file like cairnd's pool; each backup reads a read-only snapshot")
	fmt.Println("   of it, bind-mounted at one path for both tools; each tool has its own versitygw (posix) on loopback,")
	fmt.Println("   reached through a counting TCP proxy; cairn with ONE S3 location like restic's one repository, its")
	fmt.Println("   production form with two after; warm page cache for both: the snapshot is read once before each")
	fmt.Println("   backup pair, sync before each backup; cairn's incremental is given the previous snapshot as")
	fmt.Println("   ParentDir, as cairnd gives it the parent checkpoint's disk)")

	one := &contender{name: "cairn, 1 location (Open + Backup)"}
	rst := &contender{name: "restic backup"}
	two := &contender{name: "cairn, 2 locations (Open + Backup)"}
	var rounds []roundInfo
	for i := range nRounds {
		profile := ""
		if *offsiteProfile != "" && i == nRounds-1 {
			profile = *offsiteProfile
		}
		ri, err := o.round(ctx, i, one, rst, two, profile)
		if err != nil {
			return fmt.Errorf("round %d: %w", i+1, err)
		}
		rounds = append(rounds, ri)
	}
	fmt.Printf("  (restic repository version %s, compression auto; cairn: zstd, 16 MiB packs)\n\n", rounds[0].resticRepoVersion)
	reportOffsite(one, rst, two, rounds)
	return nil
}

// roundInfo is what a round found besides the contenders' runs.
type roundInfo struct {
	changes           changeSet
	resticRepoVersion string
	resticStart       time.Duration // `restic cat config`: start, unlock the key, read the config
}

// round measures each contender's first upload of a snapshot of the tree
// into a fresh bucket, changes 1% of the files of the live tree, and
// measures the incremental backups of a new snapshot, cairn's with the
// first snapshot as ParentDir. Before each backup pair the snapshot is
// bind-mounted at o.view, where both tools read it, and read once. The
// order of cairn and restic alternates between rounds.
func (o *offsiteEnv) round(ctx context.Context, i int, one, rst, two *contender, profile string) (ri roundInfo, err error) {
	id := fmt.Sprintf("r%d", i+1)
	snapA, snapB := o.pool.TempPath(id+"-a"), o.pool.TempPath(id+"-b")
	// The view and the snapshots go at the end of the round, also when it
	// failed or was interrupted.
	defer func() {
		cctx := context.WithoutCancel(ctx)
		cerr := unmount(cctx, o.view)
		// Reclaimed: btrfs' cleaner must not work during the next round.
		for _, e := range o.pool.ReclaimAll(cctx, []string{snapA, snapB}) {
			cerr = cmp.Or(cerr, e)
		}
		if cerr != nil && err == nil {
			err = cerr
		}
	}()
	// The buckets go at the end of the round (the temp dir at the end of
	// the group): a round needs 4 GiB of room on disk.
	defer func() {
		for _, b := range []string{"c1-" + id, "c2a-" + id, "c2b-" + id} {
			_ = o.cairn.removeBucket(b)
		}
		_ = o.restic.removeBucket("restic-" + id)
	}()
	c1, err := o.newCairn(ctx, "c1-"+id)
	if err != nil {
		return ri, err
	}
	c2, err := o.newCairn(ctx, "c2a-"+id, "c2b-"+id)
	if err != nil {
		return ri, err
	}
	rs, err := o.newRestic(ctx, "restic-"+id)
	if err != nil {
		return ri, err
	}
	defer os.RemoveAll(rs.cache)
	t0 := time.Now()
	if ri.resticRepoVersion, err = rs.repoVersion(ctx); err != nil {
		return ri, err
	}
	ri.resticStart = time.Since(t0)
	if err := o.show(ctx, snapA); err != nil {
		return ri, err
	}

	type step struct {
		c   *contender
		run func(incremental bool) (offsiteRun, error)
	}
	steps := []step{
		{one, func(incr bool) (offsiteRun, error) {
			return c1.backup(ctx, o.view, incr, snapA, profileName(profile, incr))
		}},
		{rst, func(incr bool) (offsiteRun, error) { return rs.backup(ctx, o.view) }},
	}
	if i%2 == 1 {
		steps[0], steps[1] = steps[1], steps[0]
	}
	steps = append(steps, step{two, func(incr bool) (offsiteRun, error) { return c2.backup(ctx, o.view, incr, snapA, "") }})

	for _, s := range steps {
		r, err := s.run(false)
		if err != nil {
			return ri, fmt.Errorf("%s, first upload: %w", s.c.name, err)
		}
		s.c.first = append(s.c.first, r)
	}
	if ri.changes, err = changeTree(ctx, o.tree, i); err != nil {
		return ri, err
	}
	if err := o.show(ctx, snapB); err != nil {
		return ri, err
	}
	for _, s := range steps {
		r, err := s.run(true)
		if err != nil {
			return ri, fmt.Errorf("%s, incremental: %w", s.c.name, err)
		}
		r.stored = r.stored.minus(s.c.first[len(s.c.first)-1].stored)
		s.c.incr = append(s.c.incr, r)
	}
	return ri, nil
}

func profileName(prefix string, incremental bool) string {
	switch {
	case prefix == "":
		return ""
	case incremental:
		return prefix + "-incremental.pprof"
	default:
		return prefix + "-first.pprof"
	}
}

// show snapshots the live tree read-only to snap, bind-mounts the snapshot
// at o.view in place of the one there, and reads every file of it once (not
// timed), so that both tools find it in the page cache: a snapshot's files
// are inodes of their own, not cached by writing the live tree.
func (o *offsiteEnv) show(ctx context.Context, snap string) error {
	if err := o.pool.Snapshot(ctx, o.tree.root, snap, true); err != nil {
		return fmt.Errorf("snapshot the tree: %w", err)
	}
	if err := unmount(ctx, o.view); err != nil {
		return err
	}
	if err := command(ctx, "mount", "--bind", snap, o.view); err != nil {
		return err
	}
	return readTree(ctx, o.view)
}

// readTree reads every regular file under root once.
func readTree(ctx context.Context, root string) error {
	buf := make([]byte, 1<<20)
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		for {
			_, err := f.Read(buf)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
		}
	})
}

// close stops the servers, unmounts the view and the pool (whatever a
// failed or interrupted run left mounted) and removes the temp dir. If an
// unmount fails, the temp dir stays, and the error says what is mounted.
func (o *offsiteEnv) close(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	for _, s := range []*s3Server{o.cairn, o.restic} {
		if s != nil {
			s.stop()
		}
	}
	if err := unmount(ctx, o.dir); err != nil {
		return fmt.Errorf("left %s: %w", o.dir, err)
	}
	return os.RemoveAll(o.dir)
}

// unmount unmounts whatever is mounted at or below dir, trying again for
// a few seconds while it is busy.
func unmount(ctx context.Context, dir string) error {
	if left := unmountUnder(ctx, dir); len(left) > 0 {
		return fmt.Errorf("still mounted: %s", strings.Join(left, " "))
	}
	return nil
}

// command runs name with args and returns its combined output in the error.
func command(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// --- cairn ---

// cairnRepo is one repository over one bucket per location, all on
// cairn's server.
type cairnRepo struct {
	srv     *s3Server
	buckets []string
	key     *crypto.Key
	locs    []repo.Location
	last    *repo.ManifestRef
}

// newCairn makes the buckets and initialises a repository in them, with a
// key slot in each as the daemon would (not timed, like restic init).
func (o *offsiteEnv) newCairn(ctx context.Context, buckets ...string) (*cairnRepo, error) {
	c := &cairnRepo{srv: o.cairn, buckets: buckets}
	var err error
	if c.key, err = crypto.NewKey(); err != nil {
		return nil, err
	}
	for _, bucket := range buckets {
		if err := o.cairn.makeBucket(ctx, bucket); err != nil {
			return nil, err
		}
		b, err := s3.New(s3.Config{Endpoint: o.cairn.endpoint(), Bucket: bucket, Prefix: cairnPrefix,
			AccessKey: o.cairn.accessKey, SecretKey: o.cairn.secretKey})
		if err != nil {
			return nil, err
		}
		c.locs = append(c.locs, repo.Location{Name: bucket, Backend: limit.New(retry.New(b, offsiteCallRetry), offsiteConcurrentCalls)})
	}
	if _, err := repo.Init(ctx, c.key, c.locs...); err != nil {
		return nil, err
	}
	if err := repo.SaveKey(ctx, c.key, []byte("bench passphrase"), crypto.DefaultKDF, c.locs...); err != nil {
		return nil, err
	}
	return c, nil
}

// backup opens the repository (as a restarted daemon would; the key is
// already unsealed) and backs the tree at src up; if incremental, with the
// previous checkpoint as parent and parentDir, the read-only snapshot that
// checkpoint was made from, as ParentDir. With profile set, it writes a CPU
// profile of it.
func (c *cairnRepo) backup(ctx context.Context, src string, incremental bool, parentDir, profile string) (offsiteRun, error) {
	var opts repo.BackupOptions
	if incremental {
		opts.Parent = c.last
		opts.ParentDir = parentDir
	}
	syscall.Sync()
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return offsiteRun{}, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return offsiteRun{}, err
		}
		defer pprof.StopCPUProfile()
	}
	// Progress comes at most every 100 ms while the tree is walked and
	// once at the end: the call before the last one is within 100 ms of
	// the end of the walk (when the rest of the time goes to the last
	// pack's upload and the commit).
	var calls []time.Time
	opts.Progress = func(repo.Stats) { calls = append(calls, time.Now()) }
	up0, down0 := c.srv.proxy.sent()
	srv0 := c.srv.cpu()
	cpu0 := selfCPU()
	t0 := time.Now()
	r, err := repo.Open(ctx, c.key, c.locs...)
	if err != nil {
		return offsiteRun{}, err
	}
	opened := time.Now()
	ref, st, err := r.Backup(ctx, src, opts)
	if err != nil {
		return offsiteRun{}, err
	}
	run := offsiteRun{d: time.Since(t0), open: opened.Sub(t0), cpu: selfCPU() - cpu0, server: c.srv.cpu() - srv0, stats: st}
	if len(calls) >= 2 {
		run.read = calls[len(calls)-2].Sub(opened)
	}
	if len(st.Failed) > 0 {
		return offsiteRun{}, fmt.Errorf("backup failed in %v", st.Failed)
	}
	up1, down1 := c.srv.proxy.sent()
	run.sent, run.received = up1-up0, down1-down0
	c.last = &ref
	for _, b := range c.buckets {
		s, err := c.srv.bucketSize(b)
		if err != nil {
			return offsiteRun{}, err
		}
		run.stored = run.stored.plus(s)
	}
	return run, nil
}

// selfCPU is the user+system CPU time of this process so far: cairn's
// backup and the counting proxy.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// --- restic ---

// resticRepo is a restic repository in one bucket of restic's server.
type resticRepo struct {
	srv    *s3Server
	bucket string
	cache  string
	env    []string
}

// newRestic makes the bucket and runs `restic init` in it (not timed).
func (o *offsiteEnv) newRestic(ctx context.Context, bucket string) (*resticRepo, error) {
	if err := o.restic.makeBucket(ctx, bucket); err != nil {
		return nil, err
	}
	r := &resticRepo{srv: o.restic, bucket: bucket, cache: filepath.Join(o.dir, "restic-cache-"+bucket)}
	r.env = append(os.Environ(),
		"RESTIC_REPOSITORY=s3:http://"+o.restic.endpoint()+"/"+bucket,
		"RESTIC_PASSWORD=bench passphrase",
		"RESTIC_CACHE_DIR="+r.cache,
		"AWS_ACCESS_KEY_ID="+o.restic.accessKey,
		"AWS_SECRET_ACCESS_KEY="+o.restic.secretKey,
	)
	if _, err := r.run(ctx, "init"); err != nil {
		return nil, err
	}
	return r, nil
}

// run runs restic in its own process group (a ^C goes to the bench, which
// ends it by its pid through ctx) and returns its resource usage.
func (r *resticRepo) run(ctx context.Context, args ...string) (*os.ProcessState, error) {
	cmd := exec.CommandContext(ctx, "restic", args...)
	cmd.Env = r.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("restic %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return cmd.ProcessState, nil
}

// repoVersion is the version in the repository's config.
func (r *resticRepo) repoVersion(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, "restic", "cat", "config")
	cmd.Env = r.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("restic cat config: %w", err)
	}
	var cfg struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		return "", fmt.Errorf("restic cat config: %w", err)
	}
	return fmt.Sprint(cfg.Version), nil
}

// backup runs `restic backup`; restic finds the parent snapshot itself
// (same host and path).
func (r *resticRepo) backup(ctx context.Context, src string) (offsiteRun, error) {
	syscall.Sync()
	up0, down0 := r.srv.proxy.sent()
	srv0 := r.srv.cpu()
	t0 := time.Now()
	ps, err := r.run(ctx, "backup", "--quiet", "--host", "bench", src)
	if err != nil {
		return offsiteRun{}, err
	}
	run := offsiteRun{d: time.Since(t0), cpu: ps.UserTime() + ps.SystemTime(), server: r.srv.cpu() - srv0}
	up1, down1 := r.srv.proxy.sent()
	run.sent, run.received = up1-up0, down1-down0
	if run.stored, err = r.srv.bucketSize(r.bucket); err != nil {
		return offsiteRun{}, err
	}
	return run, nil
}

// --- report ---

func reportOffsite(one, rst, two *contender, rounds []roundInfo) {
	durations := func(rs []offsiteRun) []time.Duration {
		var ds []time.Duration
		for _, r := range rs {
			ds = append(ds, r.d)
		}
		return ds
	}

	compare("first upload of the tree into an empty repository",
		series{rst.name + " (floor)", durations(rst.first)},
		series{one.name, durations(one.first)})
	perRound(one.first, rst.first)
	cairnPhases(one.first)
	printBytes(one.first, rst.first)
	printSeries(series{two.name + ", for reference", durations(two.first)})
	fmt.Printf("  %-62s stored %s, sent %s\n", "", mib(median(two.first, storedBytes)), mib(median(two.first, sentBytes)))
	c1, r1 := p50(durations(one.first)), p50(durations(rst.first))
	goal(c1 <= r1, "first upload no slower than restic (cairn %s, restic %s: %.2f×)", round(c1), round(r1), float64(c1)/float64(r1))
	cs1, rs1 := median(one.first, storedBytes), median(rst.first, storedBytes)
	goal(cs1 <= rs1, "stored after the first upload no more than restic's (cairn %s, restic %s: %+.1f%%)", mib(cs1), mib(rs1), bytesPct(cs1, rs1))
	fmt.Println()

	cs := rounds[len(rounds)-1].changes
	var kinds []string
	for _, k := range treeKinds {
		kinds = append(kinds, fmt.Sprintf("%d %s", cs.kinds[k], k))
	}
	compare(fmt.Sprintf("incremental backup after changing %d files (%s; %s written, in place or appended)", cs.files, strings.Join(kinds, ", "), mib(cs.bytes)),
		series{rst.name + " (floor)", durations(rst.incr)},
		series{one.name, durations(one.incr)})
	perRound(one.incr, rst.incr)
	cairnPhases(one.incr)
	printBytes(one.incr, rst.incr)
	printSeries(series{two.name + ", for reference", durations(two.incr)})
	fmt.Printf("  %-62s stored +%s, sent %s\n", "", mib(median(two.incr, storedBytes)), mib(median(two.incr, sentBytes)))
	if n := len(one.incr); n > 0 {
		st := one.incr[n-1].stats
		fmt.Printf("  cairn's Stats (last round): %d files, %d read (%s), %s of changed files taken unread from the parent snapshot,\n",
			st.Files, st.FilesRead, mib(st.BytesRead), mib(st.BytesShared))
		fmt.Printf("    %d chunks new, %d reused, %d packs, %s uploaded\n", st.ChunksNew, st.ChunksReused, st.Packs, mib(st.BytesUploaded))
	}
	var starts []time.Duration
	for _, r := range rounds {
		starts = append(starts, r.resticStart)
	}
	printSeries(series{"reference: `restic cat config` (start, unlock the key, read)", starts})
	ci, ri := p50(durations(one.incr)), p50(durations(rst.incr))
	speedup := float64(ri) / float64(ci)
	goal(speedup >= goalIncrementalSpeedup, "incremental at least %.0f× faster than restic's (cairn %s, restic %s: %.2f× faster)", goalIncrementalSpeedup, round(ci), round(ri), speedup)
	ct := cs1 + median(one.incr, storedBytes)
	rt := rs1 + median(rst.incr, storedBytes)
	goal(ct <= rt, "stored after both backups no more than restic's (cairn %s, restic %s: %+.1f%%)", mib(ct), mib(rt), bytesPct(ct, rt))
	fmt.Println()
}

// perRound prints each round's time of cairn and restic.
func perRound(cairn, restic []offsiteRun) {
	list := func(rs []offsiteRun) string {
		var parts []string
		for _, r := range rs {
			parts = append(parts, round(r.d).String())
		}
		return strings.Join(parts, " / ")
	}
	fmt.Printf("  by round (cairn first in odd rounds, restic in even): cairn %s; restic %s\n", list(cairn), list(restic))
}

// cairnPhases prints the p50 of each phase of cairn's backups.
func cairnPhases(rs []offsiteRun) {
	var ph phases
	for _, r := range rs {
		ph.add("Open", r.open)
		ph.add("walk (read, chunk, hash, compress, seal)", r.read)
		ph.add("last pack's upload + commit", r.d-r.open-r.read)
	}
	ph.print("cairn, 1 location")
}

// printBytes prints the p50 of stored and sent bytes and CPU time of cairn
// (one location) and restic.
func printBytes(cairn, restic []offsiteRun) {
	for _, x := range []struct {
		name string
		rs   []offsiteRun
	}{{"cairn", cairn}, {"restic", restic}} {
		fmt.Printf("  %-7s stored %9s in %5d objects · sent %9s, received %8s · CPU %s, versitygw's %s (p50)\n", x.name,
			mib(median(x.rs, storedBytes)), median(x.rs, func(r offsiteRun) int64 { return int64(r.stored.objects) }),
			mib(median(x.rs, sentBytes)), mib(median(x.rs, func(r offsiteRun) int64 { return r.received })),
			round(p50(cpuTimes(x.rs, func(r offsiteRun) time.Duration { return r.cpu }))),
			round(p50(cpuTimes(x.rs, func(r offsiteRun) time.Duration { return r.server }))))
	}
	fmt.Printf("  by object (last round): cairn %s; restic %s\n", cairn[len(cairn)-1].stored.kinds(), restic[len(restic)-1].stored.kinds())
	fmt.Printf("  ratio cairn/restic (p50): stored %.2f×, sent %.2f×\n",
		ratio(median(cairn, storedBytes), median(restic, storedBytes)), ratio(median(cairn, sentBytes), median(restic, sentBytes)))
}

func storedBytes(r offsiteRun) int64 { return r.stored.bytes }

func (s stored) plus(o stored) stored {
	out := stored{bytes: s.bytes + o.bytes, objects: s.objects + o.objects, byKind: map[string]int64{}}
	for k, v := range s.byKind {
		out.byKind[k] += v
	}
	for k, v := range o.byKind {
		out.byKind[k] += v
	}
	return out
}

func (s stored) minus(o stored) stored {
	neg := stored{bytes: -o.bytes, objects: -o.objects, byKind: map[string]int64{}}
	for k, v := range o.byKind {
		neg.byKind[k] = -v
	}
	return s.plus(neg)
}

// kinds is the bytes by kind of object, largest first.
func (s stored) kinds() string {
	names := slices.Collect(maps.Keys(s.byKind))
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(s.byKind[b], s.byKind[a]) })
	var parts []string
	for _, n := range names {
		v := s.byKind[n]
		if v == 0 {
			continue
		}
		if v >= 1<<20 {
			parts = append(parts, fmt.Sprintf("%s/ %s", n, mib(v)))
		} else {
			parts = append(parts, fmt.Sprintf("%s/ %.1f KiB", n, float64(v)/1024))
		}
	}
	return strings.Join(parts, " · ")
}

func sentBytes(r offsiteRun) int64 { return r.sent }

func cpuTimes(rs []offsiteRun, f func(offsiteRun) time.Duration) []time.Duration {
	var ds []time.Duration
	for _, r := range rs {
		ds = append(ds, f(r))
	}
	return ds
}

// median is the p50 (rank n/2 of the sorted values) of f over rs.
func median(rs []offsiteRun, f func(offsiteRun) int64) int64 {
	var ds []time.Duration
	for _, r := range rs {
		ds = append(ds, time.Duration(f(r)))
	}
	return int64(p50(ds))
}

func p50(ds []time.Duration) time.Duration {
	v, _ := percentiles(ds)
	return v
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func bytesPct(a, b int64) float64 { return 100 * (ratio(a, b) - 1) }
