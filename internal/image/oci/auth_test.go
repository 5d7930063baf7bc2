package oci

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/testenv/testregistry"
)

// A private registry, with basic authentication or with the bearer-token
// flow most registries use: refused without credentials and with wrong
// ones (I04), fetched with the right ones given as flags or found in the
// docker config file ($DOCKER_CONFIG/config.json).
func TestFetchFromPrivateRegistries(t *testing.T) {
	for _, bearer := range []bool{false, true} {
		name := map[bool]string{false: "basic", true: "bearer"}[bearer]
		t.Run(name, func(t *testing.T) {
			reg := testregistry.Start(t, testregistry.Options{Username: "puller", Password: "s3cret", Bearer: bearer})
			ref := reg.Ref("team/app", "1")
			want := reg.Push(t, ref, testregistry.Image(t, testregistry.Config{},
				testregistry.Layer(t, testregistry.File("f", "x\n", 0o644))))
			t.Setenv("DOCKER_CONFIG", t.TempDir()) // no credentials there yet

			fetch := func(opts FetchOptions) (string, error) {
				img, _, err := Fetch(context.Background(), ref, opts)
				if err != nil {
					return "", err
				}
				d, err := img.Digest()
				return d.String(), err
			}
			for _, opts := range []FetchOptions{{}, {Username: "puller", Password: "wrong"}} {
				if _, err := fetch(opts); errdefs.CodeOf(err) != api.CodeRegistryDenied {
					t.Errorf("fetch with %+v: %v, want %s", opts, err, api.CodeRegistryDenied)
				}
			}
			if got, err := fetch(FetchOptions{Username: "puller", Password: "s3cret"}); err != nil || got != want {
				t.Fatalf("fetch with credentials: %s, %v; want %s", got, err, want)
			}
			tokens := 0
			for _, q := range reg.Requests() {
				if q.Path == "/token" && q.Status == 200 {
					tokens++
				}
			}
			if bearer && tokens == 0 {
				t.Error("no token was asked for: the bearer flow was not exercised")
			}

			dir := t.TempDir()
			auth := base64.StdEncoding.EncodeToString([]byte("puller:s3cret"))
			cfg := `{"auths":{"` + reg.Addr() + `":{"auth":"` + auth + `"}}}`
			if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv("DOCKER_CONFIG", dir)
			if got, err := fetch(FetchOptions{}); err != nil || got != want {
				t.Fatalf("fetch with the docker config file's credentials: %s, %v; want %s", got, err, want)
			}
		})
	}
}

// A pull by someone below admin reaches no private address and no plain
// HTTP (cairnd's own network is not theirs to probe), and never uses the
// docker config file's credentials.
func TestUntrustedFetchRefusesPrivateRegistries(t *testing.T) {
	reg := testregistry.Start(t, testregistry.Options{})
	ref := reg.Ref("team/app", "1")
	reg.Push(t, ref, testregistry.Image(t, testregistry.Config{}, testregistry.Layer(t, testregistry.File("f", "x\n", 0o644))))
	for _, opts := range []FetchOptions{{Untrusted: true}, {Untrusted: true, Insecure: true}} {
		if _, _, err := Fetch(context.Background(), ref, opts); errdefs.CodeOf(err) != api.CodeForbidden {
			t.Errorf("untrusted fetch from loopback %+v: %v, want %s", opts, err, api.CodeForbidden)
		}
	}
	if n := reg.BlobGets() + len(reg.Requests()); n != 0 {
		t.Errorf("the registry was reached %d times", n)
	}
	if _, _, err := Fetch(context.Background(), ref, FetchOptions{}); err != nil {
		t.Errorf("the administrator's fetch: %v", err)
	}
}
