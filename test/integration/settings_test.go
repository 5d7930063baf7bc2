package integration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// A sandbox's --env, --user, --workdir and --label: every exec starts with
// them (its own --env wins), a change is seen by the next exec, a fork
// keeps them, list --label finds by them, and bad ones are V02 with
// nothing made.
func TestSandboxSettings(t *testing.T) {
	d := startDaemon(t)
	d.create("agent", "--network", "none", "--env", "MODEL=big", "--env", "DEBUG=1", "--workdir", "/tmp",
		"--user", "nobody", "--label", "team=ml", "--label", "stage=dev")
	if got := d.sh("agent", "echo $MODEL $DEBUG; pwd; id -un"); got != "big 1\n/tmp\nnobody\n" {
		t.Fatalf("exec with the sandbox's settings: %q", got)
	}
	if got := d.mustCLI("exec", "agent", "--env", "MODEL=small", "--user", "root", "--", "sh", "-c", "echo $MODEL; id -un"); got != "small\nroot\n" {
		t.Fatalf("an exec's own --env and --user: %q", got)
	}

	d.mustCLI("config", "agent", "--env", "MODEL=medium", "--unset-env", "DEBUG", "--workdir", "", "--label", "stage=test", "--unlabel", "team")
	if got := d.sh("agent", "echo $MODEL ${DEBUG:-unset}; pwd"); got != "medium unset\n/\n" {
		t.Fatalf("after cairn config: %q", got)
	}
	var sb api.Sandbox
	json.Unmarshal([]byte(d.mustCLI("--json", "info", "agent")), &sb)
	if strings.Join(sb.Env, " ") != "MODEL=medium" || sb.User != "nobody" || sb.Workdir != "" || len(sb.Labels) != 1 || sb.Labels["stage"] != "test" {
		t.Fatalf("info: env %v user %q workdir %q labels %v", sb.Env, sb.User, sb.Workdir, sb.Labels)
	}

	d.mustCLI("fork", "agent", "--name-prefix", "copy")
	d.waitState("copy-1", api.StateRunning, time.Minute)
	if got := d.sh("copy-1", "echo $MODEL; id -un"); got != "medium\nnobody\n" {
		t.Fatalf("a fork's settings: %q", got)
	}
	d.create("other", "--network", "none", "--label", "stage=prod")
	names := func(args ...string) string {
		var list []api.Sandbox
		json.Unmarshal([]byte(d.mustCLI(append([]string{"--json", "list"}, args...)...)), &list)
		var out []string
		for _, s := range list {
			out = append(out, s.Name)
		}
		return strings.Join(out, " ")
	}
	if got := names("--label", "stage=test"); got != "agent copy-1" {
		t.Errorf("list --label stage=test: %q", got)
	}
	if got := names("--label", "stage"); got != "agent copy-1 other" {
		t.Errorf("list --label stage: %q", got)
	}
	if got := names("--label", "stage=prod", "--label", "team"); got != "" {
		t.Errorf("list with two labels none has: %q", got)
	}

	for _, args := range [][]string{
		{"create", "bad", "--env", "CAIRN_SANDBOX=x"},
		{"create", "bad", "--workdir", "relative"},
		{"create", "bad", "--label", "-x=1"},
		{"config", "agent", "--env", "NOEQUALS"},
	} {
		if code := d.errorCode(args...); code != api.CodeInvalidArgument {
			t.Errorf("cairn %v: %s, want V02", args, code)
		}
	}
	if got := names(); strings.Contains(got, "bad") {
		t.Errorf("a refused create left a sandbox: %q", got)
	}
}
