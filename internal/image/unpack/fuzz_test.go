package unpack_test

import (
	"archive/tar"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/image/unpack"
)

// FuzzApply applies any bytes as a layer over a lower layer full of
// symbolic links to the sentinel directory beside the root: it may fail,
// but never panics and never changes anything outside the root. (Under
// -fuzz, run it on a machine you can lose: a bug it finds may write
// where the layer says.)
func FuzzApply(f *testing.F) {
	dev := hdr(tar.TypeChar, "dev/null", 0o666)
	dev.Devmajor, dev.Devminor = 1, 3
	for _, seed := range [][]entry{
		{dirE("./", 0o755), fileE("etc/passwd", "root:x:0:0\n"), symlinkE("bin/sh", "busybox"), linkE("bin/ash", "etc/passwd")},
		{fileE("esc/secret", "pwned"), fileE("rel/secret", "pwned"), fileE("up/outside/secret", "pwned")},
		{linkE("p", "esc/secret"), linkE("q", "/etc/passwd"), linkE("r", "../outside/secret")},
		{whiteoutE("esc/.wh.secret"), whiteoutE("rel/.wh..wh..opq"), whiteoutE(".wh.."), whiteoutE("d/.wh..wh..opq")},
		{dirE("esc/", 0o700), fileE("esc/x", "x"), whiteoutE(".wh.up"), fileE("d/inner", "i")},
		{fileE("../outside/secret", "pwned"), fileE("/abs/name", "a"), {hdr: dev}, entry{hdr: hdr(tar.TypeFifo, "d/fifo", 0o600)}},
		{fileE("x", "x").with(xattrs("user.a", "1", "security.capability", capNetRaw, "trusted.overlay.opaque", "y"))},
	} {
		f.Add(layer(f, seed...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		im := newImage(t)
		lower := []entry{
			dirE("d/", 0o755), fileE("d/file", "lower"), symlinkE("up", ".."), symlinkE("rel", "../outside"),
			symlinkE("d/deep", "../../outside/sub"),
		}
		lower = append(lower, symlinkE("esc", im.outside), symlinkE("d/esc", im.outside+"/sub/file"))
		im.must(layer(t, lower...))
		_, _ = im.apply(data, unpack.Options{MaxEntries: 1000, MaxBytes: 1 << 20})
		im.untouched()
	})
}
