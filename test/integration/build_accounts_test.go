package integration

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Two accounts building the same Dockerfile over HTTPS each run every
// step into entries of their own account (another's steps are never a
// hit, so neither image holds a tree the other's commands made); each
// hits its own entries the second time; the administrator's socket
// builds for the default account, with its own entries too.
func TestImageBuildCacheIsPerAccount(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	ln.Close()
	d := startDaemon(t, "--listen", listen)
	info, err := d.client.ServerInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d.mustCLI("account", "create", "alice")
	d.mustCLI("account", "create", "bob")
	pin := "CAIRN_TLS_FINGERPRINT=" + info.TLSFingerprint
	alice := d.remoteUser(t, "CAIRN_HOST="+info.Listen, "CAIRN_TOKEN="+d.token("alice", "laptop", "member").Token, pin)
	bob := d.remoteUser(t, "CAIRN_HOST="+info.Listen, "CAIRN_TOKEN="+d.token("bob", "ci", "member").Token, pin)

	dir := t.TempDir()
	writeContext(t, dir, map[string]string{
		"Dockerfile": "FROM busybox\nCOPY f /f\nRUN cat /proc/sys/kernel/random/uuid > /made-by\n",
		"f":          "the same file\n",
	})
	build := func(who string, cli func(args ...string) (string, string, int), tag string, wantCached bool) {
		t.Helper()
		_, errOut, code := cli("image", "build", dir, "-t", tag, "--network", "none")
		if code != 0 {
			t.Fatalf("%s's build: exit %d\n%s", who, code, errOut)
		}
		steps := fsSteps(errOut)
		if len(steps) != 2 {
			t.Fatalf("%s's build: steps %q", who, steps)
		}
		for _, s := range steps {
			if strings.Contains(s, "(cached)") != wantCached {
				t.Errorf("%s's build: %s, want cached %v", who, s, wantCached)
			}
		}
	}
	aliceCLI := func(args ...string) (string, string, int) { return alice.cli("", args...) }
	bobCLI := func(args ...string) (string, string, int) { return bob.cli("", args...) }
	adminCLI := func(args ...string) (string, string, int) { return d.cli("", args...) }

	build("alice", aliceCLI, "app-alice", false)
	build("bob", bobCLI, "app-bob", false)
	build("the admin", adminCLI, "app-admin", false)
	build("alice", aliceCLI, "app-alice", true)
	build("bob", bobCLI, "app-bob", true)

	// Each image holds its own account's RUN.
	made := map[string]bool{}
	for _, img := range []string{"app-alice", "app-bob", "app-admin"} {
		name := strings.TrimPrefix(img, "app-")
		d.create(name, "--image", img, "--network", "none")
		made[d.sh(name, "cat /made-by")] = true
	}
	if len(made) != 3 {
		t.Errorf("the three accounts' images share a RUN step's tree: %v", made)
	}
	// Two entries (COPY, RUN) for each of the three accounts, each named
	// with its account's id.
	es, _ := os.ReadDir(filepath.Join(d.dataDir, "pool", "cache"))
	byAccount := map[string]int{}
	for _, e := range es {
		if rest, ok := strings.CutPrefix(e.Name(), "step-"); ok {
			id, _, _ := strings.Cut(rest, "-")
			byAccount[id]++
		}
	}
	if len(byAccount) != 3 {
		t.Errorf("step entries by account id %v, want three accounts", byAccount)
	}
	for id, n := range byAccount {
		if n != 2 {
			t.Errorf("account %s has %d step entries, want 2", id, n)
		}
	}
}
