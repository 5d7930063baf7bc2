package initd

import (
	"slices"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
)

func TestImageDefaultsAreTakenOutOfTheEnvironment(t *testing.T) {
	env, dir, usr := imageDefaults([]string{"PATH=/bin", envImageDir + "=/app", "A=1", envImageUser + "=1000:1000"})
	if !slices.Equal(env, []string{"PATH=/bin", "A=1"}) || dir != "/app" || usr != "1000:1000" {
		t.Fatalf("got %v %q %q", env, dir, usr)
	}
}

func TestLookupUser(t *testing.T) {
	for _, tc := range []struct {
		spec     string
		uid, gid uint32
		home     string
		fails    bool
	}{
		{spec: "0", uid: 0, gid: 0, home: "/root"},
		{spec: "root", uid: 0, gid: 0, home: "/root"},
		{spec: "4242", uid: 4242, gid: 0}, // not in /etc/passwd: group 0, as Docker
		{spec: "4242:4343", uid: 4242, gid: 4343},
		{spec: "root:4343", uid: 0, gid: 4343, home: "/root"},
		{spec: "no-such-user-here", fails: true},
		{spec: "0:no-such-group-here", fails: true},
	} {
		id, err := lookupUser(tc.spec)
		if tc.fails {
			if err == nil {
				t.Errorf("%q: no error", tc.spec)
			}
			continue
		}
		if err != nil || id.cred == nil || id.cred.Uid != tc.uid || id.cred.Gid != tc.gid || id.home != tc.home {
			t.Errorf("%q: %+v %+v %v", tc.spec, id, id.cred, err)
		}
	}
	if id, err := lookupUser(""); err != nil || id.cred != nil {
		t.Errorf("empty: %+v %v", id, err)
	}
}

// The sandbox's defaults reach services, after the image's and before the
// service's own, and never a command's environment.
func TestSandboxDefaults(t *testing.T) {
	base := []string{"PATH=/bin", `CAIRN_SANDBOX_ENV=["A=1","B=2"]`, "CAIRN_SANDBOX_WORKDIR=/srv", "CAIRN_SANDBOX_USER=nobody", "CAIRN_IMAGE_WORKDIR=/img"}
	req := withSandboxDefaults(base, api.ExecRequest{Command: []string{"true"}, Env: []string{"B=9"}})
	if strings.Join(req.Env, " ") != "A=1 B=2 B=9" || req.Dir != "/srv" || req.User != "nobody" {
		t.Fatalf("service request %+v", req)
	}
	own := withSandboxDefaults(base, api.ExecRequest{Command: []string{"true"}, Dir: "/x", User: "root"})
	if own.Dir != "/x" || own.User != "root" {
		t.Fatalf("a service's own dir and user: %+v", own)
	}
	env, dir, _ := imageDefaults(base)
	if strings.Join(env, " ") != "PATH=/bin" || dir != "/img" {
		t.Fatalf("a command's environment %v, dir %q: the sandbox defaults are cairnd's to give", env, dir)
	}
}
