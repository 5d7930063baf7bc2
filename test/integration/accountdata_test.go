package integration

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/repo"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/local"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/s3"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/s3/s3test"
	"github.com/cairn-sandbox/cairn/internal/repo/crypto"
)

// twoAccounts starts cairnd with an HTTPS listener (and args) and returns
// a member of each of two new accounts, alice and bob.
func twoAccounts(t *testing.T, aliceFlags []string, args ...string) (d *daemon, alice, bob *remote) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	ln.Close()
	d = startDaemon(t, append([]string{"--listen", listen}, args...)...)
	info, err := d.client.ServerInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	d.mustCLI(append([]string{"account", "create", "alice"}, aliceFlags...)...)
	d.mustCLI("account", "create", "bob")
	user := func(account string) *remote {
		tok := d.token(account, "t", "member")
		return d.remoteUser(t, "CAIRN_HOST="+info.Listen, "CAIRN_TOKEN="+tok.Token, "CAIRN_TLS_FINGERPRINT="+info.TLSFingerprint)
	}
	return d, user("alice"), user("bob")
}

// Each account's disk limit holds for its own sandboxes and checkpoints:
// one account past its limit gets L04 while another goes on, account
// show counts each account's own data, and raising the limit lets the
// first go on.
func TestAccountDiskLimitIsPerAccount(t *testing.T) {
	d, alice, bob := twoAccounts(t, []string{"--disk-limit", "100M"})
	used := func(r *remote) int64 {
		var acct api.AccountInfo
		if err := json.Unmarshal([]byte(r.must("--json", "account")), &acct); err != nil {
			t.Fatal(err)
		}
		return acct.DiskUsed
	}
	const M = 1 << 20

	alice.must("create", "a", "--network", "none")
	alice.must("exec", "a", "--", "sh", "-c", "head -c 60000000 /dev/urandom > /root/one; sync")
	alice.must("checkpoint", "create", "a")
	bob.must("create", "b", "--network", "none")
	bob.must("exec", "b", "--", "sh", "-c", "head -c 40000000 /dev/urandom > /root/one; sync")
	// The checkpoint shares the root's data: alice's 60 MB count once.
	if u := used(alice); u < 55*M || u > 80*M {
		t.Fatalf("alice uses %d MiB after 60 MB and a checkpoint of them, want about 60", u/M)
	}
	if u := used(bob); u < 35*M || u > 55*M {
		t.Fatalf("bob uses %d MiB after 40 MB, want about 40 (nothing of alice's)", u/M)
	}

	alice.must("exec", "a", "--", "sh", "-c", "head -c 60000000 /dev/urandom > /root/two; sync")
	for _, args := range [][]string{{"checkpoint", "create", "a"}, {"create", "a2", "--network", "none"}, {"fork", "a", "--from-checkpoint", "v0"}} {
		if code, msg := alice.errorCode(args...); code != api.CodeDiskLimit {
			t.Errorf("alice's %v past her 100M: %s %s, want L04", args, code, msg)
		}
	}
	// Bob, without a limit of his own or a host default, goes on.
	bob.must("checkpoint", "create", "b")
	bob.must("create", "b2", "--network", "none")

	d.mustCLI("account", "set", "alice", "--disk-limit", "1G")
	alice.must("checkpoint", "create", "a")
	var acct api.AccountInfo
	json.Unmarshal([]byte(alice.must("--json", "account")), &acct)
	if acct.DiskLimit != 1<<30 || acct.DiskUsed < 110*M {
		t.Fatalf("alice after the raise: %+v", acct)
	}
}

// Each account's checkpoints go to its own two locations, sealed with its
// own key: alice's to the embedded default of her own (under the data
// dir, not the default account's), bob's to the two S3 servers the config
// file gives him; neither key opens the other's repository.
func TestAccountOffsiteIsItsOwn(t *testing.T) {
	srv := [2]*s3test.Server{s3test.Start(t), s3test.Start(t)}
	config, _ := json.Marshal(map[string]any{"accounts": map[string]any{"bob": map[string]any{"offsite": map[string]any{
		"retry_max": "2s", "locations": []map[string]any{
			s3Location("east", srv[0], srv[0].Config.SecretKey), s3Location("west", srv[1], srv[1].Config.SecretKey)}}}}})
	configFile := filepath.Join(t.TempDir(), "cairnd.json")
	if err := os.WriteFile(configFile, config, 0o600); err != nil {
		t.Fatal(err)
	}
	d, alice, bob := twoAccounts(t, nil, "--config", configFile)
	for _, u := range []*remote{alice, bob} {
		u.must("create", "s", "--network", "none")
		u.must("exec", "s", "--", "sh", "-c", "echo mine > /root/f")
		u.must("checkpoint", "create", "s")
	}
	waitUploaded := func(u *remote) api.Checkpoint {
		deadline := time.Now().Add(time.Minute)
		for {
			var ck api.Checkpoint
			json.Unmarshal([]byte(u.must("--json", "checkpoint", "info", "s", "v0")), &ck)
			if ck.Offsite == "uploaded ×2" {
				return ck
			}
			if time.Now().After(deadline) {
				t.Fatalf("off-site state %q after a minute; detail %+v", ck.Offsite, ck.OffsiteDetail)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitUploaded(alice)
	waitUploaded(bob)
	var acct api.AccountInfo
	json.Unmarshal([]byte(bob.must("--json", "account")), &acct)
	if len(acct.OffsiteLocations) != 2 || acct.OffsiteLocations[0] != "east" || acct.OffsiteLocations[1] != "west" {
		t.Fatalf("bob's locations: %v", acct.OffsiteLocations)
	}

	dirs, _ := filepath.Glob(filepath.Join(d.dataDir, "offsite", "account-*"))
	if len(dirs) != 2 {
		t.Fatalf("account directories under offsite/: %v, want alice's and bob's (his key file)", dirs)
	}
	var aliceDir, bobKey string
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "primary")); err == nil {
			aliceDir = dir
		} else {
			bobKey = filepath.Join(dir, "account.key")
		}
	}
	if aliceDir == "" {
		t.Fatalf("no account directory holds alice's locations: %v", dirs)
	}
	aliceSecret, err1 := os.ReadFile(filepath.Join(aliceDir, "account.key"))
	bobSecret, err2 := os.ReadFile(bobKey)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	ctx := context.Background()
	aliceLoc := func(name string) repo.Location {
		b, err := local.New(filepath.Join(aliceDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return repo.Location{Name: name, Backend: b}
	}
	bobLoc := func(i int) repo.Location {
		c := srv[i].Config
		b, err := s3.New(s3.Config{Endpoint: c.Endpoint, Bucket: c.Bucket, AccessKey: c.AccessKey, SecretKey: c.SecretKey})
		if err != nil {
			t.Fatal(err)
		}
		return repo.Location{Name: "east", Backend: b}
	}
	manifests := func(loc repo.Location, secret []byte) int {
		key, err := repo.LoadKey(ctx, loc, secret)
		if err != nil {
			t.Fatalf("%s with its account's key: %v", loc.Name, err)
		}
		r, err := repo.Open(ctx, key, loc)
		if err != nil {
			t.Fatal(err)
		}
		return len(r.List())
	}
	for _, loc := range []repo.Location{aliceLoc("primary"), aliceLoc("secondary")} {
		if n := manifests(loc, aliceSecret); n != 1 {
			t.Errorf("alice's %s holds %d checkpoints, want her one", loc.Name, n)
		}
		if _, err := repo.LoadKey(ctx, loc, bobSecret); !errors.Is(err, crypto.ErrWrongPassphrase) {
			t.Errorf("bob's key on alice's %s: %v, want the wrong passphrase", loc.Name, err)
		}
	}
	for i := range srv {
		if n := manifests(bobLoc(i), bobSecret); n != 1 {
			t.Errorf("bob's location %d holds %d checkpoints, want his one", i, n)
		}
		if _, err := repo.LoadKey(ctx, bobLoc(i), aliceSecret); !errors.Is(err, crypto.ErrWrongPassphrase) {
			t.Errorf("alice's key on bob's location %d: %v, want the wrong passphrase", i, err)
		}
	}
	// The default account keeps the locations it always had, and holds
	// none of theirs.
	if entries, _ := os.ReadDir(filepath.Join(d.dataDir, "offsite", "primary", "manifests")); len(entries) != 0 {
		t.Errorf("the default account's primary holds %d manifests, want none", len(entries))
	}
}
