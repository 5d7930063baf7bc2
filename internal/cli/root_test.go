package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
)

// runCLI runs cairn with args and returns its exit code and output.
func runCLI(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = execute(ctx, args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsageErrorsExit2(t *testing.T) {
	// No daemon listens there: an accepted command line would exit 1.
	sock := filepath.Join(t.TempDir(), "none.sock")
	for _, args := range [][]string{
		{"exec", "web"},
		{"exec"},
		{"exec", "--", "ls"},
		{"exec", "-d", "-i", "web", "--", "sleep", "1"},
		{"exec", "-e", "NOEQUALS", "web", "--", "env"},
		{"exec", "web", "ls", "-l"}, // -l taken for a flag: "--" is needed
		{"info"},
		{"info", "a", "b"},
		{"create"},
		{"create", "web", "--cpus", "many"},
		{"list", "extra"},
		{"console"},
		{"bogus"},
		{"image", "bogus"},
		{"list", "--bogus"},
	} {
		code, stdout, stderr := runCLI(t, context.Background(), append([]string{"--socket", sock}, args...)...)
		if code != exitUsage {
			t.Errorf("cairn %q: exit %d, want %d (stderr %q)", args, code, exitUsage, stderr)
			continue
		}
		if stdout != "" {
			t.Errorf("cairn %q: stdout %q, want nothing", args, stdout)
		}
		if !(strings.HasPrefix(stderr, "error: ") || strings.HasPrefix(stderr, "error V02: ")) || !strings.Contains(stderr, "Usage:") {
			t.Errorf("cairn %q: stderr %q, want an error and the usage", args, stderr)
		}
	}
}

func TestUsageErrorJSON(t *testing.T) {
	code, stdout, stderr := runCLI(t, context.Background(), "--json", "exec", "web")
	if code != exitUsage {
		t.Fatalf("exit %d, want %d", code, exitUsage)
	}
	var body api.ErrorBody
	if err := json.Unmarshal([]byte(stdout), &body); err != nil || !strings.Contains(body.Error.Message, "needs a command") {
		t.Errorf("stdout %q (%v), want a JSON error about the missing command", stdout, err)
	}
	if !strings.Contains(stderr, "Usage:") {
		t.Errorf("stderr %q, want the usage", stderr)
	}
}

func TestHelpExits0(t *testing.T) {
	for _, args := range [][]string{{}, {"--help"}, {"exec", "--help"}, {"image"}} {
		code, stdout, _ := runCLI(t, context.Background(), args...)
		if code != exitOK || !strings.Contains(stdout, "Usage:") {
			t.Errorf("cairn %q: exit %d, stdout %q; want 0 and the help", args, code, stdout)
		}
	}
}

func TestReportErrors(t *testing.T) {
	apiErr := &client.Error{Status: 404, Code: api.CodeNoSandbox, Message: `no sandbox named "web"`}
	for _, tc := range []struct {
		name       string
		err        error
		json       bool
		wantCode   int
		wantStderr string
		wantJSON   *api.ErrorInfo
	}{
		{"api error", apiErr, false, 1, "error S01: no sandbox named \"web\"\n", nil},
		{"api error json", apiErr, true, 1, "", &api.ErrorInfo{Code: "S01", Message: `no sandbox named "web"`}},
		{"local error", errors.New("cannot reach cairnd"), false, 1, "error: cannot reach cairnd\n", nil},
		{"local error json", errors.New("cannot reach cairnd"), true, 1, "", &api.ErrorInfo{Message: "cannot reach cairnd"}},
		{"exec not found", execFailure(&client.Error{Code: api.CodeExecFailed, Message: "nope: not found"}), false, 127, "error S08: nope: not found\n", nil},
		{"exec other", execFailure(apiErr), false, 125, "error S01: no sandbox named \"web\"\n", nil},
		{"exec exit code", &exitError{code: 3}, false, 3, "", nil},
		{"interrupted", context.Canceled, false, 130, "error: interrupted\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			g := newGlobalOptions(nil, &out, &errb)
			g.JSON = tc.json
			if code := g.report(nil, tc.err); code != tc.wantCode {
				t.Errorf("exit %d, want %d", code, tc.wantCode)
			}
			if errb.String() != tc.wantStderr {
				t.Errorf("stderr %q, want %q", errb.String(), tc.wantStderr)
			}
			if tc.wantJSON == nil {
				if out.Len() != 0 {
					t.Errorf("stdout %q, want nothing", out.String())
				}
				return
			}
			var body api.ErrorBody
			if err := json.Unmarshal(out.Bytes(), &body); err != nil {
				t.Fatalf("stdout %q: %v", out.String(), err)
			}
			if body.Error != *tc.wantJSON {
				t.Errorf("JSON error %+v, want %+v", body.Error, *tc.wantJSON)
			}
		})
	}
}

func TestSocketFromEnvironment(t *testing.T) {
	t.Setenv("CAIRN_SOCKET", "/somewhere/cairn.sock")
	code, _, stderr := runCLI(t, context.Background(), "list")
	if code != exitFailure || !strings.Contains(stderr, "/somewhere/cairn.sock") {
		t.Errorf("exit %d, stderr %q; want 1 and the socket from CAIRN_SOCKET", code, stderr)
	}
}
