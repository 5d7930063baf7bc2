package image

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/image/oci"
	"github.com/cairn-sandbox/cairn/internal/metadata/sqlite"
	"github.com/cairn-sandbox/cairn/internal/testenv/testregistry"
)

// An image larger than the pool fails with L07 and leaves nothing
// half-made: no work subvolume, no image, no row. (The layers applied
// before the pool filled stay in the cache, whole: evictable, and a
// later pull need not fetch them again.)
func TestPullIntoAFullPool(t *testing.T) {
	ctx := context.Background()
	pool, dir := loopPool(t, 256<<20)
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "cairn.db"), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	c := New(pool, filepath.Join(dir, "cache"), store)

	// 320 MiB that do not compress, in two files.
	big := func() string {
		b := make([]byte, 120<<20)
		rand.Read(b)
		return base64.StdEncoding.EncodeToString(b)
	}
	reg := testregistry.Start(t, testregistry.Options{})
	ref := reg.Ref("big/app", "1")
	reg.Push(t, ref, testregistry.Image(t, testregistry.Config{},
		testregistry.Layer(t, testregistry.File("a", big(), 0o644)), testregistry.Layer(t, testregistry.File("b", big(), 0o644))))

	_, err = c.Pull(ctx, PullRequest{Ref: ref, Name: "big", Fetch: oci.FetchOptions{Insecure: true}}, nil)
	if code := errdefs.CodeOf(err); code != api.CodePoolFull {
		t.Fatalf("pull into a full pool: %v (code %q), want %s", err, code, api.CodePoolFull)
	}
	for _, d := range []string{"tmp", "images"} {
		if entries, _ := os.ReadDir(filepath.Join(pool.Root(), d)); len(entries) != 0 {
			t.Errorf("left in the pool's %s: %v", d, entries)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(pool.Root(), "cache"))
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "layers-") {
			t.Errorf("left in the cache: %s", e.Name())
		}
	}
	if len(entries) > 1 {
		t.Errorf("cache entries %v: only the first layer fitted", entries)
	}
	if imgs, _ := store.Images(ctx); len(imgs) != 0 {
		t.Errorf("rows left: %+v", imgs)
	}
}
