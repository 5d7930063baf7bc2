package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/cairn-sandbox/cairn/api"
)

// benchImages measures a pull of an image of about 300 MB in 6 layers
// from a registry on loopback (go-containerregistry's, in this process)
// against the same image exported and untarred (what `crane export |
// tar -x` does: go-containerregistry's mutate.Extract piped into GNU
// tar) into a subvolume of the same pool; a second pull of the same
// digest; a pull of an image that adds a layer to one pulled (the layer
// cache); create+start from the pulled image against busybox.
func benchImages(ctx context.Context, e *env) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(discardLogger()))}
	go srv.Serve(ln)
	defer srv.Close()

	const layers, perLayer = 5, 60 << 20
	big, err := randomImage(layers, perLayer)
	if err != nil {
		return err
	}
	bigLayers, err := big.Layers()
	if err != nil {
		return err
	}
	runs := max(3, e.n/5)
	var pulls, floors, again, added []time.Duration
	for i := range runs {
		ref := fmt.Sprintf("%s/bench/img%d:1", ln.Addr(), i)
		r, err := name.ParseReference(ref, name.Insecure)
		if err != nil {
			return err
		}
		// A new image each run: its bottom layer is new, and so is every
		// chain ID above it, so no run starts from the layer cache.
		img, err := mutate.AppendLayers(empty.Image, mustLayer(4<<10))
		if err == nil {
			img, err = mutate.AppendLayers(img, bigLayers...)
		}
		if err == nil {
			img, err = withPlatform(img)
		}
		if err != nil {
			return err
		}
		if err := remote.Write(r, img, remote.WithContext(ctx)); err != nil {
			return fmt.Errorf("push: %w", err)
		}
		t0 := time.Now()
		if err := pullImage(ctx, e, ref, fmt.Sprintf("bench-img-%d", i)); err != nil {
			return err
		}
		pulls = append(pulls, time.Since(t0))

		t0 = time.Now()
		if err := pullImage(ctx, e, ref, fmt.Sprintf("bench-img-%d-again", i)); err != nil {
			return err
		}
		again = append(again, time.Since(t0))

		// The same six layers and one more: only that one is fetched.
		more, err := mutate.AppendLayers(img, mustLayer(4<<10))
		if err != nil {
			return err
		}
		moreRef := fmt.Sprintf("%s/bench/img%d:2", ln.Addr(), i)
		mr, err := name.ParseReference(moreRef, name.Insecure)
		if err != nil {
			return err
		}
		if err := remote.Write(mr, more, remote.WithContext(ctx)); err != nil {
			return fmt.Errorf("push: %w", err)
		}
		t0 = time.Now()
		if err := pullImage(ctx, e, moreRef, fmt.Sprintf("bench-img-%d-more", i)); err != nil {
			return err
		}
		added = append(added, time.Since(t0))

		dir := filepath.Join(e.d.poolDir(), "tmp", fmt.Sprintf("bench-export-%d", i))
		t0 = time.Now()
		if err := exportUntar(ctx, r, dir); err != nil {
			return fmt.Errorf("export | tar -x: %w", err)
		}
		floors = append(floors, time.Since(t0))
		btrfs(ctx, "subvolume", "delete", dir)
	}
	report(fmt.Sprintf("pull and unpack of %d MiB in %d layers from a loopback registry", layers*perLayer>>20, layers+1),
		pulls, "the same image: export | tar -x into a subvolume of the pool", floors)
	report("pull of an image that adds a small layer to one pulled (layer cache)", added,
		"the first pull, of all its layers", pulls)
	p50, _ := percentiles(again)
	fmt.Printf("  second pull of the same digest (another name): p50 %s (goal ≤ 100ms)\n\n", round(p50))

	// create+start from the pulled image (its bottom layer brings a
	// busybox for `true`) against busybox.
	var pulled, busybox []time.Duration
	for i := range e.n {
		for _, image := range []string{"bench-img-0", "busybox"} {
			n := fmt.Sprintf("imgcs-%s-%d", map[bool]string{true: "pulled", false: "busybox"}[image != "busybox"], i)
			t0 := time.Now()
			if err := createSandboxReq(ctx, e.c, api.CreateSandboxRequest{Name: n, Image: image, Network: &api.NetworkChange{Mode: "none"}}); err != nil {
				return err
			}
			if err := execTrue(ctx, e.c, n); err != nil {
				return err
			}
			d := time.Since(t0)
			if image == "busybox" {
				busybox = append(busybox, d)
			} else {
				pulled = append(pulled, d)
			}
			deleteSandbox(ctx, e.c, n)
		}
	}
	report("create+start+exec true", pulled, "the same from busybox", busybox)
	pp50, _ := percentiles(pulled)
	bp50, _ := percentiles(busybox)
	fmt.Printf("  a pulled image adds %s at p50 (goal ≤ +20ms)\n\n", round(pp50-bp50))
	return nil
}

func discardLogger() *log.Logger { return log.New(io.Discard, "", 0) }

func pullImage(ctx context.Context, e *env, ref, name string) error {
	op, err := e.c.PullImage(ctx, api.PullImageRequest{Ref: ref, Name: name, Insecure: true})
	if err != nil {
		return err
	}
	_, err = e.c.WaitImage(ctx, op, nil)
	return err
}

// exportUntar is the floor: the image's flattened tree (mutate.Extract,
// what crane export writes) untarred by GNU tar into a new subvolume.
func exportUntar(ctx context.Context, r name.Reference, dir string) error {
	img, err := remote.Image(r, remote.WithContext(ctx))
	if err != nil {
		return err
	}
	if err := btrfs(ctx, "subvolume", "create", dir); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "tar", "-x", "-C", dir)
	rc := mutate.Extract(img)
	defer rc.Close()
	cmd.Stdin = rc
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

// randomImage is an image of layers layers of size bytes of random data
// each (files of 4 MiB).
func randomImage(layers int, size int64) (v1.Image, error) {
	img := empty.Image
	for i := range layers {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for f := int64(0); f < size; f += 4 << 20 {
			b := make([]byte, 4<<20)
			rand.Read(b)
			if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("data/l%d/f%d", i, f>>22), Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
				return nil, err
			}
			tw.Write(b)
		}
		tw.Close()
		raw := buf.Bytes()
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil })
		if err != nil {
			return nil, err
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			return nil, err
		}
	}
	return withPlatform(img)
}

// withPlatform is img for linux/amd64.
func withPlatform(img v1.Image) (v1.Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	return mutate.ConfigFile(img, cf)
}

// mustLayer is a small layer with one random file, and a busybox for
// exec (the bench image has no shell otherwise).
func mustLayer(size int) v1.Layer {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	b := make([]byte, size)
	rand.Read(b)
	tw.WriteHeader(&tar.Header{Name: "data/small", Mode: 0o644, Size: int64(size), Typeflag: tar.TypeReg})
	tw.Write(b)
	if bb, err := os.ReadFile("/bin/busybox"); err == nil {
		tw.WriteHeader(&tar.Header{Name: "bin/busybox", Mode: 0o755, Size: int64(len(bb)), Typeflag: tar.TypeReg})
		tw.Write(bb)
		for _, l := range []string{"sh", "true"} {
			tw.WriteHeader(&tar.Header{Name: "bin/" + l, Linkname: "busybox", Typeflag: tar.TypeSymlink})
		}
	}
	tw.Close()
	raw := buf.Bytes()
	l, _ := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil })
	return l
}
