package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// remote is the CLI of one user on another machine: it reaches cairnd
// over HTTPS, with its own config directory and no unix socket.
type remote struct {
	d      *daemon
	config string   // XDG_CONFIG_HOME
	env    []string // CAIRN_HOST, CAIRN_TOKEN, …
}

func (d *daemon) remoteUser(t *testing.T, env ...string) *remote {
	return &remote{d: d, config: t.TempDir(), env: env}
}

// cli runs cairn as the remote user.
func (r *remote) cli(stdin string, args ...string) (stdout, stderr string, code int) {
	r.d.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "cairn"), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + r.config, "XDG_CONFIG_HOME=" + r.config,
		"CAIRN_SOCKET=/nonexistent/cairn.sock"}, r.env...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		r.d.t.Fatalf("cairn %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

func (r *remote) must(args ...string) string {
	r.d.t.Helper()
	out, errOut, code := r.cli("", args...)
	if code != 0 {
		r.d.t.Fatalf("remote cairn %s: exit %d\n%s\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// errorCode runs a command expected to fail and returns its code and
// message.
func (r *remote) errorCode(args ...string) (string, string) {
	r.d.t.Helper()
	out, errOut, code := r.cli("", append([]string{"--json"}, args...)...)
	if code == 0 {
		r.d.t.Fatalf("remote cairn %v succeeded, want an error\n%s", args, out)
	}
	var eb api.ErrorBody
	if err := json.Unmarshal([]byte(out), &eb); err != nil {
		r.d.t.Fatalf("remote cairn %v: not the error shape: %q %q", args, out, errOut)
	}
	return eb.Error.Code, eb.Error.Message
}

// token makes a token as the administrator (the unix socket).
func (d *daemon) token(account, name, role string, extra ...string) api.NewToken {
	d.t.Helper()
	var tok api.NewToken
	out := d.mustCLI(append([]string{"--json", "token", "create", "--account", account, "--name", name, "--role", role}, extra...)...)
	if err := json.Unmarshal([]byte(out), &tok); err != nil || !strings.HasPrefix(tok.Token, "cairn_") {
		d.t.Fatalf("token create: %q (%v)", out, err)
	}
	return tok
}

// cairnd over HTTPS with tokens: two accounts see nothing of each
// other (another's sandbox, checkpoint, snapshot and operation answer as
// missing ones do), read changes nothing, a revoked token is refused at
// its next request, login pins the certificate and a new one is refused.
func TestRemoteAccountsAreIsolated(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	ln.Close()
	d := startDaemon(t, "--listen", listen)
	info, err := d.client.ServerInfo(context.Background())
	if err != nil || info.Listen != "https://"+listen || !strings.HasPrefix(info.TLSFingerprint, "sha256:") {
		t.Fatalf("server info %+v, %v", info, err)
	}
	d.mustCLI("account", "create", "alice")
	d.mustCLI("account", "create", "bob", "--disk-limit", "1G")
	a, b := d.token("alice", "laptop", "member"), d.token("bob", "ci", "member")
	ro := d.token("alice", "dash", "read")
	pin := "CAIRN_TLS_FINGERPRINT=" + info.TLSFingerprint
	alice := d.remoteUser(t, "CAIRN_HOST="+info.Listen, "CAIRN_TOKEN="+a.Token, pin)
	bob := d.remoteUser(t, "CAIRN_HOST="+info.Listen, "CAIRN_TOKEN="+b.Token, pin)
	reader := d.remoteUser(t, "CAIRN_HOST="+info.Listen, "CAIRN_TOKEN="+ro.Token, pin)

	// Alice works over HTTPS: create, exec (an upgraded connection),
	// checkpoint, snapshot.
	alice.must("create", "web", "--image", "busybox", "--network", "none")
	if got := alice.must("exec", "web", "--", "sh", "-c", "echo over https > /f; cat /f"); got != "over https\n" {
		t.Fatalf("exec over HTTPS: %q", got)
	}
	var ck api.Checkpoint
	json.Unmarshal([]byte(alice.must("--json", "checkpoint", "create", "web")), &ck)
	alice.must("snapshot", "create", "web", "--name", "golden")
	aliceAPI, err := client.NewRemote(client.Remote{URL: info.Listen, Token: a.Token, Fingerprint: info.TLSFingerprint})
	if err != nil {
		t.Fatal(err)
	}
	ops, err := aliceAPI.Operations(context.Background())
	if err != nil || len(ops) == 0 {
		t.Fatalf("alice's operations: %v %v", ops, err)
	}
	bobAPI, _ := client.NewRemote(client.Remote{URL: info.Listen, Token: b.Token, Fingerprint: info.TLSFingerprint})
	if bobs, err := bobAPI.Operations(context.Background()); err != nil || len(bobs) != 0 {
		t.Errorf("bob sees operations: %v %v", bobs, err)
	}
	var who api.Whoami
	json.Unmarshal([]byte(alice.must("--json", "whoami")), &who)
	if who.Account != "alice" || who.Role != "member" || who.TokenName != "laptop" || who.Via != "https" {
		t.Fatalf("whoami %+v", who)
	}

	// Bob sees nothing of it, and each answer is the one of a name that
	// does not exist.
	if got := bob.must("--json", "list"); strings.TrimSpace(got) != "[]" {
		t.Errorf("bob's list: %s", got)
	}
	for _, tc := range [][2][]string{
		{{"info", "web"}, {"info", "nosuch"}},
		{{"exec", "web", "--", "true"}, {"exec", "nosuch", "--", "true"}},
		{{"checkpoint", "list", "web"}, {"checkpoint", "list", "nosuch"}},
		{{"checkpoint", "info", "web", ck.ID}, {"checkpoint", "info", "nosuch", ck.ID}},
		{{"delete", "web"}, {"delete", "nosuch"}},
		{{"snapshot", "delete", "golden"}, {"snapshot", "delete", "nosuchsnap"}},
		{{"snapshot", "restore", ck.GlobalID, "stolen"}, {"snapshot", "restore", "0123456789abcdef", "stolen"}},
		{{"operation", ops[0].ID}, {"operation", "0123456789abcdef"}},
	} {
		code, msg := bob.errorCode(tc[0]...)
		missCode, missMsg := bob.errorCode(tc[1]...)
		norm := func(s string) string {
			for _, n := range []string{"nosuchsnap", "nosuch", "golden", "web", ck.GlobalID, "0123456789abcdef", ops[0].ID} {
				s = strings.ReplaceAll(s, n, "X")
			}
			return s
		}
		if code != missCode || norm(msg) != norm(missMsg) {
			t.Errorf("bob: %v answered %s %q; a missing one %s %q", tc[0], code, msg, missCode, missMsg)
		}
	}
	if got := alice.must("exec", "web", "--", "cat", "/f"); got != "over https\n" {
		t.Errorf("alice's sandbox after bob's tries: %q", got)
	}

	// /metrics over HTTPS: admin tokens only.
	if _, err := aliceAPI.Metrics(context.Background()); client.CodeOf(err) != api.CodeForbidden {
		t.Errorf("a member's /metrics: %v, want %s", err, api.CodeForbidden)
	}
	opsTok := d.token(metadata.DefaultAccount, "ops", "admin")
	opsAPI, _ := client.NewRemote(client.Remote{URL: info.Listen, Token: opsTok.Token, Fingerprint: info.TLSFingerprint})
	if m, err := opsAPI.Metrics(context.Background()); err != nil || !strings.Contains(string(m), "cairn_checkpoints_total") {
		t.Errorf("an admin's /metrics: %v %.200q", err, m)
	}

	// Read: lists, never changes; admin routes are admin's.
	reader.must("list")
	if code, _ := reader.errorCode("create", "x", "--image", "busybox"); code != api.CodeForbidden {
		t.Errorf("read token create: %s", code)
	}
	if code, _ := alice.errorCode("token", "create", "--name", "more"); code != api.CodeForbidden {
		t.Errorf("member token create: %s", code)
	}

	// The audit log holds the session: each change, its token, its
	// outcome (bob's and the reader's refused attempts too); alice's own
	// view holds her account's alone.
	var log []api.AuditEntry
	json.Unmarshal([]byte(d.mustCLI("--json", "audit")), &log)
	want := []struct{ action, target, token, outcome string }{
		{"account.create", "alice", "", "ok"},
		{"token.create", a.Info.ID, "", "ok"},
		{"sandbox.create", "web", "laptop", "accepted"},
		{"checkpoint.create", "web", "laptop", "accepted"},
		{"snapshot.create", "web", "laptop", "accepted"},
		{"sandbox.delete", "web", "ci", api.CodeNoSandbox},
		{"snapshot.delete", "golden", "ci", api.CodeNoCheckpoint},
		{"sandbox.create", "", "dash", api.CodeForbidden}, // refused before its body is read
		{"token.create", "", "laptop", api.CodeForbidden},
	}
	for _, w := range want {
		found := false
		for _, e := range log {
			if e.Action == w.action && e.Target == w.target && e.TokenName == w.token && e.Outcome == w.outcome {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("audit log lacks %+v", w)
		}
	}
	json.Unmarshal([]byte(alice.must("--json", "audit")), &log)
	if len(log) < 3 {
		t.Errorf("alice's audit log: %+v", log)
	}
	for _, e := range log {
		if e.Account != "alice" {
			t.Errorf("alice's audit log shows %+v", e)
		}
	}

	// Revoked: refused at the next request.
	d.mustCLI("token", "revoke", a.Info.ID)
	if code, _ := alice.errorCode("list"); code != api.CodeUnauthenticated {
		t.Errorf("revoked token: %s", code)
	}

	// Login pins the certificate (0600 config); a server with another
	// certificate is refused.
	user := d.remoteUser(t)
	if out, errOut, code := user.cli("", "login", info.Listen, "--token", b.Token, "--yes"); code != 0 {
		t.Fatalf("login: %s %s", out, errOut)
	}
	cfgFile := filepath.Join(user.config, "cairn", "config.json")
	fi, err := os.Stat(cfgFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config file: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(cfgFile); !strings.Contains(string(b), info.TLSFingerprint) {
		t.Errorf("config file does not pin the fingerprint: %s", b)
	}
	json.Unmarshal([]byte(user.must("--json", "whoami")), &who)
	if who.Account != "bob" {
		t.Fatalf("after login, whoami %+v", who)
	}
	d.kill(syscall.SIGTERM)
	os.RemoveAll(filepath.Join(d.dataDir, "tls"))
	d.start() // the same address, a new self-signed certificate
	if info2, _ := d.client.ServerInfo(context.Background()); info2.TLSFingerprint == info.TLSFingerprint || info2.Listen != info.Listen {
		t.Fatalf("after the restart: %+v", info2)
	}
	if _, errOut, code := user.cli("", "whoami"); code == 0 || !strings.Contains(errOut, "not the one pinned") {
		t.Errorf("a server showing another certificate than pinned: exit %d %s", code, errOut)
	}
	if _, errOut, code := user.cli("", "login", info.Listen, "--token", b.Token, "--yes"); code == 0 || !strings.Contains(errOut, "not the one pinned") {
		t.Errorf("login again to a server with another certificate: exit %d %s", code, errOut)
	}
}
