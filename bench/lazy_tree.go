package main

import (
	"archive/tar"
	"fmt"
	"io"
	"math/rand/v2"
	"path"
	"time"
)

// The lazy group's tree, written into the source sandbox as a tar stream
// (`tar -x` inside, fed through exec's stdin): random (incompressible)
// bulk data, many small files and some large ones, under /data/a, and the
// web service's "application" under /srv/zzapp, which the manifest (in
// path order) lists after the bulk.
const (
	lazyAppDir    = "/srv/zzapp"
	lazyAppFiles  = 300
	lazyAppMin    = 16 << 10
	lazyAppMax    = 256 << 10
	lazySmallMin  = 4 << 10
	lazySmallMax  = 64 << 10
	lazyLargeMin  = 16 << 20
	lazyLargeMax  = 256 << 20
	lazySmallPart = 8 // 1/8 of the tree is small files
	lazyPage      = "cairn bench lazy\n"
)

// lazyTree is what writeLazyTree wrote.
type lazyTree struct {
	small, large, app                int
	smallBytes, largeBytes, appBytes int64
}

func (t lazyTree) total() (files int, size int64) {
	return t.small + t.large + t.app + 1, t.smallBytes + t.largeBytes + t.appBytes + int64(len(lazyPage))
}

func (t lazyTree) describe() string {
	return fmt.Sprintf("bulk under /data/a: %d small files of 4-64 KiB (%s) and %d large of 16-256 MiB (%s); application under %s: %d files of 16-256 KiB (%s)",
		t.small, mib(t.smallBytes), t.large, mib(t.largeBytes), lazyAppDir, t.app, mib(t.appBytes))
}

// writeLazyTree writes a tar stream of about size bytes of file data to w
// (deterministic: a fixed seed).
func writeLazyTree(w io.Writer, size int64) (lazyTree, error) {
	var t lazyTree
	rng := rand.New(rand.NewPCG(20, 26))
	data := rand.NewChaCha8([32]byte{20})
	tw := tar.NewWriter(w)
	now := time.Now()
	dirs := map[string]bool{}
	mkdir := func(dir string) error {
		var missing []string
		for d := dir; d != "." && d != "/" && !dirs[d]; d = path.Dir(d) {
			missing = append(missing, d)
		}
		for i := len(missing) - 1; i >= 0; i-- {
			dirs[missing[i]] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: missing[i] + "/", Mode: 0o755, ModTime: now}); err != nil {
				return err
			}
		}
		return nil
	}
	file := func(name string, n int64) error {
		if err := mkdir(path.Dir(name)); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: n, ModTime: now}); err != nil {
			return err
		}
		_, err := io.CopyN(tw, data, n)
		return err
	}
	app := int64(0)
	appSizes := make([]int64, lazyAppFiles)
	for i := range appSizes {
		appSizes[i] = int64(lazyAppMin + rng.IntN(lazyAppMax-lazyAppMin))
		app += appSizes[i]
	}
	smallBudget := size / lazySmallPart
	for i := 0; t.smallBytes < smallBudget; i++ {
		n := min(int64(lazySmallMin+rng.IntN(lazySmallMax-lazySmallMin)), smallBudget-t.smallBytes)
		if err := file(fmt.Sprintf("data/a/small/%03d/f%05d.bin", i/200, i), n); err != nil {
			return t, err
		}
		t.small++
		t.smallBytes += n
	}
	largeBudget := max(0, size-smallBudget-app)
	for i := 0; t.largeBytes < largeBudget; i++ {
		n := min(int64(lazyLargeMin+rng.IntN(lazyLargeMax-lazyLargeMin)), largeBudget-t.largeBytes)
		if err := file(fmt.Sprintf("data/a/large/blob-%03d.bin", i), n); err != nil {
			return t, err
		}
		t.large++
		t.largeBytes += n
	}
	for i, n := range appSizes {
		if err := file(fmt.Sprintf("srv/zzapp/lib/mod-%03d.bin", i), n); err != nil {
			return t, err
		}
		t.app++
		t.appBytes += n
	}
	if err := mkdir("srv/zzapp/www"); err != nil {
		return t, err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "srv/zzapp/www/index.html", Mode: 0o644, Size: int64(len(lazyPage)), ModTime: now}); err != nil {
		return t, err
	}
	if _, err := io.WriteString(tw, lazyPage); err != nil {
		return t, err
	}
	return t, tw.Close()
}
