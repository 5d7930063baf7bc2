package image

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/image/oci"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/metadata/sqlite"
	"github.com/cairn-sandbox/cairn/internal/testenv/testregistry"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// pullCatalog is a catalog on a loop pool with a metadata store: pulls
// are on.
func pullCatalog(t *testing.T) (*Catalog, *volume.Pool, metadata.Store) {
	t.Helper()
	c, pool := loopCatalog(t)
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "cairn.db"), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	c.store = store
	return c, pool, store
}

// blobGets counts the registry's answered GETs of each blob, by digest.
func blobGets(reg *testregistry.Registry) map[string]int {
	n := map[string]int{}
	for _, q := range reg.Requests() {
		if _, d, ok := strings.Cut(q.Path, "/blobs/"); ok && q.Method == http.MethodGet && q.Status == http.StatusOK {
			n[d]++
		}
	}
	return n
}

// fetched is what blobGets counted for the digests since before.
func fetched(reg *testregistry.Registry, before map[string]int, digests ...string) []int {
	now := blobGets(reg)
	var out []int
	for _, d := range digests {
		out = append(out, now[d]-before[d])
	}
	return out
}

// treeOf describes every path of the tree at root: type, mode, owner,
// size, content's digest or link target, extended attributes, which
// names share an inode, and the times of all but directories (cairn adds
// directories to the root when it pulls).
func treeOf(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	inodes := map[uint64]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		line := fmt.Sprintf("%s %v %d:%d", rel, fi.Mode(), st.Uid, st.Gid)
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %d %x %d", len(b), sha256.Sum256(b), fi.ModTime().UnixNano())
			if first, ok := inodes[st.Ino]; ok {
				line += " =" + first
			}
			inodes[st.Ino] = rel
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target + fmt.Sprint(" ", fi.ModTime().UnixNano())
		}
		return appendXattrs(&out, line, p)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func appendXattrs(out *[]string, line, p string) error {
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(p, buf)
	if err != nil && !errors.Is(err, unix.ENOTSUP) {
		return err
	}
	names := strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00")
	slices.Sort(names)
	for _, name := range names {
		if name == "" {
			continue
		}
		v := make([]byte, 4096)
		k, err := unix.Lgetxattr(p, name, v)
		if err != nil {
			return err
		}
		line += fmt.Sprintf(" %s=%q", name, v[:k])
	}
	*out = append(*out, line)
	return nil
}

func chainKeys(t *testing.T, img v1.Image) []string {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, c := range oci.ChainIDs(cf.RootFS.DiffIDs) {
		keys = append(keys, layerKey(c))
	}
	return keys
}

// random is n random bytes, as a file's body.
func random(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return string(b)
}

// Image A has three layers, the two below over keepEvery each (so that
// their chains are kept); image B shares those two and has a third of
// its own, which removes and replaces files of the two below. Pulling B
// after A fetches none of the shared layers and gives the tree a pull
// from scratch gives; A is untouched. After a prune every layer is
// fetched again.
func TestLayerCacheSharesLayersAcrossImages(t *testing.T) {
	ctx := context.Background()
	c, pool, _ := pullCatalog(t)
	reg := testregistry.Start(t, testregistry.Options{})

	withXattr := testregistry.File("/home/app/file", "app file\n", 0o640).Owned(1000, 1000)
	withXattr.Xattrs = map[string]string{"user.cairn": "test"}
	l1 := testregistry.Layer(t,
		testregistry.Dir("/etc", 0o755),
		testregistry.File("/etc/base.conf", "base v1\n", 0o644),
		testregistry.Dir("/opt/old", 0o755),
		testregistry.File("/opt/old/a", "a\n", 0o644),
		testregistry.File("/usr/bin/tool", "#!/bin/sh\necho tool\n", 0o755),
		testregistry.File("/big/one", random(keepEvery+1), 0o644),
	)
	l2 := testregistry.Layer(t,
		testregistry.Whiteout("/opt/old/a"),
		testregistry.Hardlink("/usr/bin/tool-link", "/usr/bin/tool"),
		testregistry.Symlink("/usr/bin/t", "tool"),
		testregistry.File("/usr/bin/suid", "suid\n", 0o4755),
		withXattr,
		testregistry.File("/big/two", random(keepEvery+1), 0o600),
	)
	l3 := testregistry.Layer(t, testregistry.File("/etc/base.conf", "base v2\n", 0o600))
	own := testregistry.Layer(t,
		testregistry.Whiteout("/opt"),
		testregistry.File("/etc/b-only", "b\n", 0o640).Owned(7, 8),
		testregistry.Dir("/srv", 0o711),
		testregistry.File("/srv/data", strings.Repeat("B", 70000), 0o600),
		testregistry.Hardlink("/srv/again", "/srv/data"),
	)
	imgA := testregistry.Image(t, testregistry.StandardConfig(), l1, l2, l3)
	imgB := testregistry.Image(t, testregistry.StandardConfig(), l1, l2, own)
	la := []v1.Layer{l1, l2}
	refA, refB := reg.Ref("team/a", "1"), reg.Ref("team/b", "1")
	reg.Push(t, refA, imgA)
	reg.Push(t, refB, imgB)
	da, db := testregistry.LayerDigests(t, imgA), testregistry.LayerDigests(t, imgB)
	if da[0] != db[0] || da[1] != db[1] || da[2] == db[2] {
		t.Fatalf("layers of A %v and B %v", da, db)
	}
	keysA, keysB := chainKeys(t, imgA), chainKeys(t, imgB)

	pull := func(ref, name string) ([]string, error) {
		var lines []string
		_, err := c.Pull(ctx, PullRequest{Ref: ref, Name: name}, func(_ api.Progress, line string) { lines = append(lines, line) })
		return lines, err
	}
	before := blobGets(reg)
	if _, err := pull(refA, "a"); err != nil {
		t.Fatal(err)
	}
	if got := fetched(reg, before, da...); !slices.Equal(got, []int{1, 1, 1}) {
		t.Errorf("pull of A fetched its layers %v times", got)
	}
	treeA := treeOf(t, pool.ImagePath("a"))
	for _, want := range []string{
		"etc/base.conf -rw------- 0:0 8",
		"home/app/file -rw-r----- 1000:1000 9 ",
		"usr/bin/suid urwxr-xr-x 0:0",
		"usr/bin/t Lrwxrwxrwx 0:0 -> tool",
		"usr/bin/tool-link -rwxr-xr-x 0:0 20 ",
		".cairn drwxr-xr-x 0:0",
	} {
		if !slices.ContainsFunc(treeA, func(l string) bool { return strings.HasPrefix(l, want) }) {
			t.Errorf("A has no %q: %q", want, treeA)
		}
	}
	if !slices.ContainsFunc(treeA, func(l string) bool { return strings.HasSuffix(l, " =usr/bin/tool") }) {
		t.Errorf("A's hard link is not one: %q", treeA)
	}
	if !slices.ContainsFunc(treeA, func(l string) bool { return strings.Contains(l, `user.cairn="test"`) }) {
		t.Errorf("A lost an extended attribute: %q", treeA)
	}
	// The cache holds the layers' tree, before cairn's directories.
	if _, err := os.Lstat(filepath.Join(pool.CachePath(keysA[2]), ".cairn")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the top chain's entry has /.cairn: %v", err)
	}
	for _, k := range keysA {
		if !c.cache.Has(k) {
			t.Errorf("after A, no cache entry %s", k)
		}
	}

	before = blobGets(reg)
	lines, err := pull(refB, "b")
	if err != nil {
		t.Fatal(err)
	}
	if got := fetched(reg, before, db...); !slices.Equal(got, []int{0, 0, 1}) {
		t.Errorf("pull of B after A fetched its layers %v times, want [0 0 1]", got)
	}
	for i, d := range db[:2] {
		want := fmt.Sprintf("Layer %d/3 %s: cached", i+1, shortDigest(d))
		if !slices.Contains(lines, want) {
			t.Errorf("no %q in %q", want, lines)
		}
	}
	if !c.cache.Has(keysB[2]) {
		t.Errorf("after B, no cache entry for its top chain")
	}
	treeB := treeOf(t, pool.ImagePath("b"))
	for _, want := range []string{
		"etc/b-only -rw-r----- 7:8",
		"srv/again -rw------- 0:0 70000",
	} {
		if !slices.ContainsFunc(treeB, func(l string) bool { return strings.HasPrefix(l, want) }) {
			t.Errorf("B has no %q: %q", want, treeB)
		}
	}
	if slices.ContainsFunc(treeB, func(l string) bool { return strings.HasPrefix(l, "opt") }) {
		t.Errorf("B's whiteout of /opt not applied: %q", treeB)
	}
	if got := treeOf(t, pool.ImagePath("a")); !slices.Equal(got, treeA) {
		t.Errorf("A changed by B's pull:\n%q\nwas\n%q", got, treeA)
	}

	// Prune: every entry goes, the images stay whole.
	res, err := c.PruneCache(ctx)
	if err != nil || res.Removed != 4 {
		t.Fatalf("prune: %+v, %v; want 4 removed", res, err)
	}
	if entries, err := c.cache.Entries(); err != nil || len(entries) != 0 {
		t.Fatalf("after prune: %v, %v", entries, err)
	}
	if got := treeOf(t, pool.ImagePath("a")); !slices.Equal(got, treeA) {
		t.Errorf("A changed by the prune")
	}

	// B again, under another name: every layer fetched, the same tree.
	before = blobGets(reg)
	if _, err := pull(refB, "b2"); err != nil {
		// The digest is held as "b": an instant snapshot, no layer.
		t.Fatal(err)
	}
	if got := fetched(reg, before, db...); !slices.Equal(got, []int{0, 0, 0}) {
		t.Errorf("a pull of a digest held fetched %v", got)
	}
	imgB2 := testregistry.Image(t, testregistry.Config{Env: []string{"OTHER=1"}}, la[0], la[1], own) // same layers, another digest
	refB2 := reg.Ref("team/b2", "1")
	reg.Push(t, refB2, imgB2)
	before = blobGets(reg)
	if _, err := pull(refB2, "b3"); err != nil {
		t.Fatal(err)
	}
	if got := fetched(reg, before, db...); !slices.Equal(got, []int{1, 1, 1}) {
		t.Errorf("after the prune, B's layers fetched %v times, want [1 1 1]", got)
	}
	if got := treeOf(t, pool.ImagePath("b3")); !slices.Equal(got, treeB) {
		t.Errorf("B from scratch:\n%q\nB from the cache:\n%q", got, treeB)
	}
	b, _ := c.Info(ctx, "b")
	b3, _ := c.Info(ctx, "b3")
	if b.SizeBytes != b3.SizeBytes || b.SizeBytes == 0 {
		t.Errorf("sizes %d from the cache, %d from scratch", b.SizeBytes, b3.SizeBytes)
	}

	// Its whole chain cached: no layer fetched, the same tree again.
	imgB4 := testregistry.Image(t, testregistry.Config{Env: []string{"OTHER=2"}}, la[0], la[1], own)
	refB4 := reg.Ref("team/b4", "1")
	reg.Push(t, refB4, imgB4)
	before = blobGets(reg)
	if lines, err = pull(refB4, "b4"); err != nil {
		t.Fatal(err)
	}
	if got := fetched(reg, before, db...); !slices.Equal(got, []int{0, 0, 0}) {
		t.Errorf("all chains cached, B's layers fetched %v times", got)
	}
	if want := fmt.Sprintf("Layer 3/3 %s: cached", shortDigest(db[2])); !slices.Contains(lines, want) {
		t.Errorf("no %q in %q", want, lines)
	}
	if got := treeOf(t, pool.ImagePath("b4")); !slices.Equal(got, treeB) {
		t.Errorf("B from its cached top chain differs:\n%q", got)
	}
}

// A layer that fails its check above a cached prefix fails the pull with
// I06 and leaves no work subvolume, no cache entry for its chain and no
// image; the prefix stays cached.
func TestLayerCacheBadLayerAboveCachedPrefix(t *testing.T) {
	ctx := context.Background()
	c, pool, store := pullCatalog(t)
	reg := testregistry.Start(t, testregistry.Options{})
	l1 := testregistry.Layer(t, testregistry.File("/one", random(keepEvery), 0o644))
	l2 := testregistry.Layer(t, testregistry.File("/two", random(keepEvery), 0o644))
	l3 := testregistry.Layer(t, testregistry.File("/three", "3", 0o644))
	bad := testregistry.Layer(t, testregistry.File("/three", strings.Repeat("x", 5000), 0o644))
	good := testregistry.Image(t, testregistry.Config{}, l1, l2, l3)
	broken := testregistry.Image(t, testregistry.Config{}, l1, l2, bad)
	reg.Push(t, reg.Ref("good", "1"), good)
	reg.Push(t, reg.Ref("broken", "1"), broken)
	if _, err := c.Pull(ctx, PullRequest{Ref: reg.Ref("good", "1"), Name: "good"}, nil); err != nil {
		t.Fatal(err)
	}
	keys := chainKeys(t, broken)
	digests := testregistry.LayerDigests(t, broken)

	for _, fault := range []string{"corrupt", "wrong diff id"} {
		ref := reg.Ref("broken", "1")
		if fault == "corrupt" {
			reg.CorruptBlob(digests[2])
		} else {
			reg.RestoreBlob(digests[2])
			ref = reg.Ref("broken", "2")
			reg.Push(t, ref, testregistry.WrongDiffID(t, broken, 2))
			keys = chainKeys(t, testregistry.WrongDiffID(t, broken, 2))
		}
		before := blobGets(reg)
		_, err := c.Pull(ctx, PullRequest{Ref: ref, Name: "broken"}, nil)
		if code := errdefs.CodeOf(err); code != api.CodeImageDamaged {
			t.Fatalf("%s: pull: %v (%s), want %s", fault, err, code, api.CodeImageDamaged)
		}
		if got := fetched(reg, before, digests...); got[0] != 0 || got[1] != 0 || got[2] == 0 {
			t.Errorf("%s: layers fetched %v times, want [0 0 ≥1]", fault, got)
		}
		if c.cache.Has(keys[2]) {
			t.Errorf("%s: the bad chain is cached", fault)
		}
		if !c.cache.Has(keys[1]) {
			t.Errorf("%s: the good prefix is no longer cached", fault)
		}
		if _, err := os.Lstat(pool.TempPath("pull-broken")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: the work subvolume is left: %v", fault, err)
		}
		if _, err := os.Lstat(pool.ImagePath("broken")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: the image's subvolume is left: %v", fault, err)
		}
		if _, err := store.Image(ctx, "broken"); !errors.Is(err, metadata.ErrNotFound) {
			t.Errorf("%s: an image row: %v", fault, err)
		}
	}
}

// The chain IDs of the OCI image-spec: the first is the diff id, each
// next the sha256 of the one before, a space and the layer's diff id.
func TestChainIDs(t *testing.T) {
	h := func(s string) v1.Hash {
		sum := sha256.Sum256([]byte(s))
		return v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", sum)}
	}
	d1, d2, d3 := h("1"), h("2"), h("3")
	c2 := h(d1.String() + " " + d2.String())
	c3 := h(c2.String() + " " + d3.String())
	if got := oci.ChainIDs([]v1.Hash{d1, d2, d3}); !slices.Equal(got, []v1.Hash{d1, c2, c3}) {
		t.Errorf("ChainIDs = %v, want %v", got, []v1.Hash{d1, c2, c3})
	}
}

// A pull keeps its top chain, and one each time the layers since the
// last kept reach keepEvery compressed bytes.
func TestKeptChains(t *testing.T) {
	const e = keepEvery
	for _, c := range []struct {
		sizes []int64
		want  []int
	}{
		{nil, nil},
		{[]int64{10}, []int{1}},
		{[]int64{e, e, e, 1}, []int{1, 2, 3, 4}},
		{[]int64{1, 2, 3}, []int{3}},
		{[]int64{e / 2, e / 2, 10, e + 1, 5, 5}, []int{2, 4, 6}},
		{[]int64{-1, e, 0}, []int{2, 3}},
	} {
		var got []int
		for i := range len(c.sizes) + 1 {
			if keptChains(c.sizes)[i] {
				got = append(got, i)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("keptChains(%v) = %v, want %v", c.sizes, got, c.want)
		}
	}
}
