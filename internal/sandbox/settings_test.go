package sandbox

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

func TestNewSettings(t *testing.T) {
	set, err := newSettings(api.CreateSandboxRequest{Env: []string{"A=1", "B=2", "A=3"}, User: "app:app", Workdir: "/srv",
		Labels: map[string]string{"team": "ml", "k8s.io/app": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	// A key given twice keeps its first place and its last value.
	if want := []string{"A=3", "B=2"}; !reflect.DeepEqual(set.Env, want) || set.User != "app:app" || set.Workdir != "/srv" || set.Labels["k8s.io/app"] != "x" {
		t.Fatalf("settings %+v", set)
	}
	for name, req := range map[string]api.CreateSandboxRequest{
		"no '='":            {Env: []string{"A"}},
		"empty key":         {Env: []string{"=1"}},
		"cairn's own":       {Env: []string{"CAIRN_SANDBOX=x"}},
		"NUL in value":      {Env: []string{"A=\x00"}},
		"control in key":    {Env: []string{"A\nB=1"}},
		"too many":          {Env: manyEnv(maxEnv + 1)},
		"relative workdir":  {Workdir: "srv"},
		"user with a space": {User: "a b"},
		"label key":         {Labels: map[string]string{"-x": "1"}},
		"label key long":    {Labels: map[string]string{strings.Repeat("a", 64): "1"}},
		"label value":       {Labels: map[string]string{"a": "x\ny"}},
		"env too big":       {Env: []string{"A=" + strings.Repeat("x", maxEnvBytes)}},
	} {
		if _, err := newSettings(req); errdefs.CodeOf(err) != api.CodeInvalidArgument {
			t.Errorf("%s: %v, want V02", name, err)
		}
	}
}

func manyEnv(n int) []string {
	var env []string
	for i := range n {
		env = append(env, "K"+strconv.Itoa(i)+"=1")
	}
	return env
}

func TestApplySettingsChange(t *testing.T) {
	cur := metadata.SandboxSettings{Env: []string{"A=1", "B=2"}, User: "app", Labels: map[string]string{"team": "ml", "old": ""}}
	user, dir := "", "/work"
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	next, err := applySettingsChange(cur, api.ConfigureSandboxRequest{Env: []string{"B=3", "C=4"}, UnsetEnv: []string{"A"},
		User: &user, Workdir: &dir, Labels: map[string]string{"stage": "test"}, UnsetLabels: []string{"old"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	want := metadata.SandboxSettings{Env: []string{"B=3", "C=4"}, Workdir: "/work", Labels: map[string]string{"team": "ml", "stage": "test"}}
	if !next.Equal(want) || !reflect.DeepEqual(next.Env, want.Env) {
		t.Fatalf("next %+v, want %+v", next, want)
	}
	if len(cur.Labels) != 2 || cur.Env[0] != "A=1" {
		t.Fatalf("the current settings changed: %+v", cur)
	}
	if _, err := applySettingsChange(cur, api.ConfigureSandboxRequest{Env: []string{"CAIRN_X=1"}}, now); errdefs.CodeOf(err) != api.CodeInvalidArgument {
		t.Errorf("a CAIRN_ variable: %v", err)
	}
	empty, _ := applySettingsChange(cur, api.ConfigureSandboxRequest{UnsetEnv: []string{"A", "B"}, UnsetLabels: []string{"team", "old"}}, now)
	if empty.Env != nil || empty.Labels != nil {
		t.Errorf("all removed: %+v, want nil env and labels", empty)
	}
}

// A timeout given to config starts again from now; "0" removes it; the
// action alone keeps the deadline.
func TestTimeoutChange(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	cur := metadata.SandboxSettings{Timeout: time.Hour, Deadline: now.Add(-50 * time.Minute)}
	next, err := applySettingsChange(cur, api.ConfigureSandboxRequest{Timeout: "2h", OnTimeout: "save"}, now)
	if err != nil || next.Timeout != 2*time.Hour || !next.Deadline.Equal(now.Add(2*time.Hour)) || next.OnTimeout != metadata.OnTimeoutSave {
		t.Fatalf("extend: %+v %v", next, err)
	}
	onlyAction, _ := applySettingsChange(cur, api.ConfigureSandboxRequest{OnTimeout: "delete"}, now)
	if !onlyAction.Deadline.Equal(cur.Deadline) || onlyAction.OnTimeout != metadata.OnTimeoutDelete {
		t.Fatalf("action only: %+v", onlyAction)
	}
	off, _ := applySettingsChange(cur, api.ConfigureSandboxRequest{Timeout: "0"}, now)
	if off.Timeout != 0 || !off.Deadline.IsZero() {
		t.Fatalf("off: %+v", off)
	}
	for _, bad := range []api.ConfigureSandboxRequest{{Timeout: "1ms"}, {Timeout: "31d"}, {Timeout: "soon"}, {OnTimeout: "explode"}} {
		if _, err := applySettingsChange(cur, bad, now); errdefs.CodeOf(err) != api.CodeInvalidArgument {
			t.Errorf("%+v: %v, want V02", bad, err)
		}
	}
}

func TestWithSettings(t *testing.T) {
	set := metadata.SandboxSettings{Env: []string{"A=1", "B=2"}, User: "app", Workdir: "/srv"}
	got := withSettings(api.ExecRequest{Command: []string{"sh"}, Env: []string{"B=9"}}, set)
	// cairn-init applies them in order, a later one replacing: the exec's win.
	if !reflect.DeepEqual(got.Env, []string{"A=1", "B=2", "B=9"}) || got.User != "app" || got.Dir != "/srv" {
		t.Fatalf("exec %+v", got)
	}
	own := withSettings(api.ExecRequest{Command: []string{"sh"}, User: "root", Dir: "/"}, set)
	if own.User != "root" || own.Dir != "/" {
		t.Fatalf("the exec's own user and dir: %+v", own)
	}
	if env := settingsEnv(set); !reflect.DeepEqual(env,
		[]string{`CAIRN_SANDBOX_ENV=["A=1","B=2"]`, "CAIRN_SANDBOX_WORKDIR=/srv", "CAIRN_SANDBOX_USER=app"}) {
		t.Fatalf("boot env %v", env)
	}
}
