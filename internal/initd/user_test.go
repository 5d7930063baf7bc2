package initd

import (
	"slices"
	"testing"
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
