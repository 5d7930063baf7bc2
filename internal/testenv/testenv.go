// Package testenv lets tests that need root or a tool skip on a developer's
// machine without it, and fail instead when CI=true: in CI a missing
// prerequisite is a broken set-up, never a reason to test less.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// Require skips (or, under CI=true, fails) t unless it runs as root and
// every tool is on PATH.
func Require(t testing.TB, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		missing(t, "needs root")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			missing(t, tool+" not installed (run scripts/install-deps.sh)")
		}
	}
}

func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}
