package dockerfile

import (
	"errors"
	"path"
	"reflect"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// FuzzParsePlan parses and plans arbitrary text: it must never panic,
// every error must be an *Error, and a plan that succeeds must be
// deterministic and hold what Step documents.
func FuzzParsePlan(f *testing.F) {
	seeds := []string{
		"FROM base\nRUN echo hi",
		"# escape=`\nARG V=1\nFROM base:$V AS x\nRUN a `\n  b\nCOPY --chown=1:1 [\"a\", \"b/\"]\n",
		"FROM base\nENV A=\"x y\" B=${A:-z} C=${A:+w}\nENV D e f\nWORKDIR a/../b\nCOPY . .\nADD a.tar /x/\n",
		"FROM base\nARG P=80\nEXPOSE $P 1-3 53/udp\nUSER a:b\nENTRYPOINT [\"/e\"]\nCMD x\nLABEL a=b\nMAINTAINER m\n",
		"FROM base\nRUN a \\\n# c\n\n b\nCMD [1]\n",
		"FROM --platform=$BUILDPLATFORM base\nARG TARGETARCH\nENV X=${TARGETARCH#a}${TARGETARCH%%6*}",
		"FROM base\nHEALTHCHECK NONE\n",
		"FROM base\nFROM base\n",
		"FROM base\nCOPY --from=x a b\nRUN <<EOF\n",
		"FROM base\nENV A='${B\nENV C=${D:?}\n",
	}
	for _, s := range seeds {
		f.Add(s, "V=2")
	}
	base := func(ref string) (metadata.ImageConfig, error) {
		if ref == "missing" {
			return metadata.ImageConfig{}, errNoImage
		}
		return metadata.ImageConfig{Env: []string{"PATH=/bin", "HOME=/"}, Cmd: []string{"sh"}, ExposedPorts: []int{22}}, nil
	}
	f.Fuzz(func(t *testing.T, src, buildArg string) {
		var e *Error
		df, err := Parse(strings.NewReader(src))
		if err != nil {
			if !errors.As(err, &e) {
				t.Fatalf("Parse error %v is not an *Error", err)
			}
			return
		}
		args := map[string]string{}
		if k, v, ok := strings.Cut(buildArg, "="); ok {
			args[k] = v
		}
		steps, warnings, err := Plan(df, args, base)
		if err != nil {
			if !errors.As(err, &e) {
				t.Fatalf("Plan error %v is not an *Error", err)
			}
			return
		}
		again, warnings2, err := Plan(df, args, base)
		if err != nil || !reflect.DeepEqual(steps, again) || !reflect.DeepEqual(warnings, warnings2) {
			t.Fatalf("a second Plan differs (%v)", err)
		}
		if len(steps) == 0 || steps[0].Kind != FromStep || steps[0].Base == "" {
			t.Fatalf("the plan does not start with FROM: %+v", steps)
		}
		for _, s := range steps {
			if s.Line <= 0 || !strings.HasPrefix(s.Text, s.Instruction+" ") {
				t.Fatalf("step %+v: bad line or text", s)
			}
			switch s.Kind {
			case RunStep:
				if len(s.Args) == 0 || s.Args[0] == "" {
					t.Fatalf("RUN without a command: %+v", s)
				}
			case CopyStep:
				if !path.IsAbs(s.Dest) || len(s.Sources) == 0 {
					t.Fatalf("bad COPY: %+v", s)
				}
				for _, src := range s.Sources {
					if src == "" || path.IsAbs(src) || src == ".." || strings.HasPrefix(src, "../") || path.Clean(src) != src {
						t.Fatalf("bad COPY source %q: %+v", src, s)
					}
				}
			}
			if wd := s.Config.WorkingDir; wd != "" && (!path.IsAbs(wd) || path.Clean(wd) != wd) {
				t.Fatalf("WorkingDir %q is not clean and absolute", wd)
			}
			for _, port := range s.Config.ExposedPorts {
				if metadata.ValidatePort(port) != nil {
					t.Fatalf("exposed port %d", port)
				}
			}
		}
	})
}
