package image

import (
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
)

func TestDefaultName(t *testing.T) {
	for ref, want := range map[string]string{
		"python:3.12":                                "python-3.12",
		"127.0.0.1:5000/team/app:1":                  "app-1",
		"ghcr.io/org/tool":                           "tool-latest",
		"busybox@sha256:" + strings.Repeat("ab", 32): "busybox-abababababab",
		"x/weird_name:V1.2-build_3":                  "weird_name-v1.2-build_3",
		"x/" + strings.Repeat("long", 20) + ":1":     strings.Repeat("long", 20)[:63],
	} {
		r, err := name.ParseReference(ref)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if got := DefaultName(r); got != want || !namePattern.MatchString(got) {
			t.Errorf("DefaultName(%s) = %q, want %q", ref, got, want)
		}
	}
}
