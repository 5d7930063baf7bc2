package storetest

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Images (schema version 16).

// digest returns a valid digest made of c repeated.
func digest(c string) string { return "sha256:" + strings.Repeat(c, 64) }

// newImage returns a valid image with every field set except CreatedAt.
func newImage(name, dgst string) metadata.Image {
	return metadata.Image{
		Name:   name,
		Digest: dgst,
		Source: "127.0.0.1:5000/" + name + ":1",
		Config: metadata.ImageConfig{
			Env:          []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "EMPTY="},
			Entrypoint:   []string{"/docker-entrypoint.sh"},
			Cmd:          []string{"nginx", "-g", "daemon off;"},
			WorkingDir:   "/srv/app",
			User:         "101:101",
			ExposedPorts: []int{80, 443},
		},
		SizeBytes: 187 << 20,
		DiskPath:  "images/" + name,
	}
}

func createImage(t *testing.T, s metadata.Store, img metadata.Image) {
	t.Helper()
	if err := s.CreateImage(context.Background(), img); err != nil {
		t.Fatalf("CreateImage(%q): %v", img.Name, err)
	}
}

// sameImage fails unless got equals want field by field, CreatedAt
// compared as an instant and required in UTC.
func sameImage(t *testing.T, what string, got, want metadata.Image) {
	t.Helper()
	checkUTC(t, what, got.CreatedAt)
	g, w := got, want
	g.CreatedAt, w.CreatedAt = time.Time{}, time.Time{}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got  %#v\n want %#v", what, g, w)
	}
	if !got.CreatedAt.Equal(want.CreatedAt) {
		t.Errorf("%s: created %v, want %v", what, got.CreatedAt, want.CreatedAt)
	}
}

// imageNames returns the names of imgs, failing on an error or a nil
// list.
func imageNames(t *testing.T, what string, imgs []metadata.Image, err error) string {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if imgs == nil {
		t.Errorf("%s = nil, want an empty list", what)
	}
	names := make([]string, len(imgs))
	for i, img := range imgs {
		checkUTC(t, what, img.CreatedAt)
		names[i] = img.Name
	}
	return fmt.Sprint(names)
}

// allImages returns the names Images lists.
func allImages(t *testing.T, s metadata.Store) string {
	t.Helper()
	imgs, err := s.Images(context.Background())
	return imageNames(t, "Images", imgs, err)
}

// digestImages returns the names ImagesByDigest lists for d.
func digestImages(t *testing.T, s metadata.Store, d string) string {
	t.Helper()
	imgs, err := s.ImagesByDigest(context.Background(), d)
	for _, img := range imgs {
		if img.Digest != d {
			t.Errorf("ImagesByDigest(%q) lists %q of digest %q", d, img.Name, img.Digest)
		}
	}
	return imageNames(t, fmt.Sprintf("ImagesByDigest(%q)", d), imgs, err)
}

func testImages(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	clock := NewClock()
	s := open(t, clock.Now) // closed by hand, then opened again

	if got := allImages(t, s); got != "[]" {
		t.Errorf("Images of a new store = %s", got)
	}

	// Read back exactly, with the given CreatedAt kept in UTC and
	// microseconds.
	web := newImage("web", digest("a"))
	web.CreatedAt = time.Date(2030, 1, 2, 3, 4, 5, 6007, time.FixedZone("UTC-5", -5*60*60))
	createImage(t, s, web)
	want := web
	want.CreatedAt = stored(web.CreatedAt)
	got, err := s.Image(ctx, "web")
	if err != nil {
		t.Fatalf("Image(web): %v", err)
	}
	sameImage(t, "Image(web)", got, want)

	// A zero CreatedAt is now; an empty config stays empty.
	clock.Advance(time.Minute)
	bare := metadata.Image{Name: "bare", Digest: digest("b"), Source: "import:bare.tar", DiskPath: "images/bare"}
	createImage(t, s, bare)
	bare.CreatedAt = stored(clock.Now())
	got, err = s.Image(ctx, "bare")
	if err != nil {
		t.Fatal(err)
	}
	sameImage(t, "Image(bare)", got, bare)

	// Empty lists read back as nil, as documented on ImageConfig.
	empty := metadata.Image{Name: "empty-lists", Digest: digest("c"), Source: "build:/src/app", DiskPath: "images/empty-lists",
		Config: metadata.ImageConfig{Env: []string{}, Entrypoint: []string{}, Cmd: []string{}, ExposedPorts: []int{}}}
	createImage(t, s, empty)
	got, err = s.Image(ctx, "empty-lists")
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Config; c.Env != nil || c.Entrypoint != nil || c.Cmd != nil || c.ExposedPorts != nil {
		t.Errorf("empty lists read back as %#v, want nil ones", c)
	}

	// A name taken is ErrConflict and changes nothing.
	taken := newImage("web", digest("d"))
	taken.Source = "import:other.tar"
	wantErr(t, "CreateImage(name taken)", s.CreateImage(ctx, taken), metadata.ErrConflict)
	got, err = s.Image(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	sameImage(t, "Image(web) after the conflict", got, want)

	// Images by name, byte-wise.
	createImage(t, s, newImage("Zeta", digest("e")))
	createImage(t, s, newImage("alpha", digest("a")))
	if got, want := allImages(t, s), "[Zeta alpha bare empty-lists web]"; got != want {
		t.Errorf("Images = %s, want %s", got, want)
	}

	// They persist.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, clock.Now)
	t.Cleanup(func() { s.Close() })
	got, err = s.Image(ctx, "web")
	if err != nil {
		t.Fatalf("Image(web) after reopening: %v", err)
	}
	sameImage(t, "Image(web) after reopening", got, want)

	// Delete.
	if err := s.DeleteImage(ctx, "alpha"); err != nil {
		t.Fatalf("DeleteImage: %v", err)
	}
	wantErr(t, "DeleteImage again", s.DeleteImage(ctx, "alpha"), metadata.ErrNotFound)
	wantErr(t, "DeleteImage(unknown)", s.DeleteImage(ctx, "nothing"), metadata.ErrNotFound)
	_, err = s.Image(ctx, "alpha")
	wantErr(t, "Image(deleted)", err, metadata.ErrNotFound)
	if got, want := allImages(t, s), "[Zeta bare empty-lists web]"; got != want {
		t.Errorf("Images after delete = %s, want %s", got, want)
	}
	// The name is free again.
	createImage(t, s, newImage("alpha", digest("f")))
	if got, err := s.Image(ctx, "alpha"); err != nil || got.Digest != digest("f") {
		t.Errorf("Image(alpha) made again = %+v, %v", got, err)
	}

	// Not found: names are case-sensitive.
	for _, name := range []string{"nothing", "WEB", ""} {
		_, err := s.Image(ctx, name)
		wantErr(t, fmt.Sprintf("Image(%q)", name), err, metadata.ErrNotFound)
	}
}

func testImagesByDigest(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)

	first := newImage("web", digest("a"))
	createImage(t, s, first)
	// Pulled again under other names, naming the first one's disk.
	for _, name := range []string{"web-copy", "Web", "another"} {
		img := newImage(name, digest("a"))
		img.DiskPath = first.DiskPath
		createImage(t, s, img)
	}
	createImage(t, s, newImage("other", digest("b")))

	if got, want := digestImages(t, s, digest("a")), "[Web another web web-copy]"; got != want {
		t.Errorf("ImagesByDigest(a) = %s, want %s", got, want)
	}
	imgs, err := s.ImagesByDigest(ctx, digest("a"))
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range imgs {
		want, err := s.Image(ctx, img.Name)
		if err != nil {
			t.Fatal(err)
		}
		sameImage(t, "ImagesByDigest(a)", img, want)
		if img.DiskPath != first.DiskPath {
			t.Errorf("ImagesByDigest(a) lists %q with disk %q, want %q", img.Name, img.DiskPath, first.DiskPath)
		}
	}
	if got := digestImages(t, s, digest("b")); got != "[other]" {
		t.Errorf("ImagesByDigest(b) = %s", got)
	}
	for _, d := range []string{digest("c"), strings.ToUpper(digest("a")), "", "not a digest"} {
		if got := digestImages(t, s, d); got != "[]" {
			t.Errorf("ImagesByDigest(%q) = %s, want none", d, got)
		}
	}
	if err := s.DeleteImage(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	if got, want := digestImages(t, s, digest("a")), "[Web another web-copy]"; got != want {
		t.Errorf("ImagesByDigest(a) after deleting web = %s, want %s", got, want)
	}
}

func testImageInvalidInput(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)

	for what, change := range map[string]func(*metadata.Image){
		"empty name":             func(img *metadata.Image) { img.Name = "" },
		"empty digest":           func(img *metadata.Image) { img.Digest = "" },
		"digest without prefix":  func(img *metadata.Image) { img.Digest = strings.Repeat("a", 64) },
		"sha512 digest":          func(img *metadata.Image) { img.Digest = "sha512:" + strings.Repeat("a", 64) },
		"short digest":           func(img *metadata.Image) { img.Digest = "sha256:" + strings.Repeat("a", 63) },
		"long digest":            func(img *metadata.Image) { img.Digest = "sha256:" + strings.Repeat("a", 65) },
		"upper-case digest":      func(img *metadata.Image) { img.Digest = "sha256:" + strings.Repeat("A", 64) },
		"non-hex digest":         func(img *metadata.Image) { img.Digest = "sha256:" + strings.Repeat("g", 64) },
		"digest with a newline":  func(img *metadata.Image) { img.Digest = digest("a") + "\n" },
		"empty source":           func(img *metadata.Image) { img.Source = "" },
		"negative size":          func(img *metadata.Image) { img.SizeBytes = -1 },
		"empty disk path":        func(img *metadata.Image) { img.DiskPath = "" },
		"absolute disk path":     func(img *metadata.Image) { img.DiskPath = "/images/bad" },
		"disk path out of pool":  func(img *metadata.Image) { img.DiskPath = "../images/bad" },
		"unclean disk path":      func(img *metadata.Image) { img.DiskPath = "images//bad" },
		"pool root as disk path": func(img *metadata.Image) { img.DiskPath = "." },
		"NUL in disk path":       func(img *metadata.Image) { img.DiskPath = "images/b\x00d" },
		"exposed port 0":         func(img *metadata.Image) { img.Config.ExposedPorts = []int{80, 0} },
		"exposed port 65536":     func(img *metadata.Image) { img.Config.ExposedPorts = []int{65536} },
	} {
		img := newImage("bad", digest("a"))
		change(&img)
		if err := img.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", what, img)
		}
		err := s.CreateImage(ctx, img)
		if err == nil {
			t.Errorf("%s: CreateImage succeeded", what)
		}
		wantPlainErr(t, what, err)
	}
	if got := allImages(t, s); got != "[]" {
		t.Errorf("invalid images were stored: %s", got)
	}

	// What Validate does not judge: the name's syntax.
	odd := newImage("Registry.example/App:1.0", digest("a"))
	if err := odd.Validate(); err != nil {
		t.Errorf("Validate(%q) = %v; the store does not judge name syntax", odd.Name, err)
	}
}

func testImageUsers(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	b := ensureAccount(t, s, "bob")
	createImage(t, s, newImage("app", digest("a")))
	createImage(t, s, newImage("idle", digest("b")))

	users := func(name string) string {
		t.Helper()
		sbs, cks, err := s.ImageUsers(ctx, name)
		if err != nil {
			t.Fatalf("ImageUsers(%q): %v", name, err)
		}
		return fmt.Sprintf("%d,%d", sbs, cks)
	}
	if got := users("app"); got != "0,0" {
		t.Errorf("users of a new image = %s, want 0,0", got)
	}

	// Sandboxes of both accounts, and checkpoints of them.
	mk := func(id string, acct int64, name, image string) metadata.Sandbox {
		sb := newSandbox(id, acct, name)
		sb.Image = image
		create(t, s, sb)
		return sb
	}
	web := mk("a000000000000001", a.ID, "web", "app")
	mk("a000000000000002", a.ID, "worker", "app")
	other := mk("b000000000000001", b.ID, "web", "app")
	deb := mk("b000000000000002", b.ID, "plain", "debian")
	createCk(t, s, newCheckpoint("c000000000000001", web))
	createCk(t, s, newCheckpoint("c000000000000002", web))
	createCk(t, s, newAuto("c000000000000003", other, "auto-20310517T083000Z", metadata.TriggerInterval))
	createCk(t, s, newCheckpoint("c000000000000004", deb))
	if got := users("app"); got != "3,3" {
		t.Errorf("users of app = %s, want 3,3", got)
	}
	if got := users("debian"); got != "1,1" {
		t.Errorf("users of debian (a built-in, no row) = %s, want 1,1", got)
	}
	for _, name := range []string{"idle", "nothing", "App", ""} {
		if got := users(name); got != "0,0" {
			t.Errorf("users of %q = %s, want 0,0", name, got)
		}
	}

	// A deleted sandbox stops counting; its checkpoints still do (a
	// restore as a new sandbox needs the image).
	if err := s.DeleteSandbox(ctx, web.ID); err != nil {
		t.Fatal(err)
	}
	if got := users("app"); got != "2,3" {
		t.Errorf("users of app after deleting a sandbox = %s, want 2,3", got)
	}
	for _, id := range []string{"c000000000000001", "c000000000000003"} {
		if err := s.DeleteCheckpoint(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if got := users("app"); got != "2,1" {
		t.Errorf("users of app after deleting checkpoints = %s, want 2,1", got)
	}
	// Counting does not touch the image, nor does deleting it look at
	// the counts (the caller refuses).
	if err := s.DeleteImage(ctx, "app"); err != nil {
		t.Fatalf("DeleteImage of a used image: %v", err)
	}
	if got := users("app"); got != "2,1" {
		t.Errorf("users of app after deleting its row = %s, want 2,1", got)
	}
}

// testImagesConcurrentCreate races creations of one name: exactly one
// wins, every other gets ErrConflict.
func testImagesConcurrentCreate(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)

	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = s.CreateImage(ctx, newImage("app", digest(fmt.Sprintf("%x", i))))
		})
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		default:
			wantErr(t, fmt.Sprintf("creator %d", i), err, metadata.ErrConflict)
		}
	}
	if won != 1 {
		t.Errorf("%d creations of the same name succeeded, want 1", won)
	}
}
