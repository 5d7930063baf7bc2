package dockerfile

import (
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

var errNoImage = errors.New("no such image")

// testBase is the base callback of the tests: "base" (any tag) has an
// Env, a Cmd and a port; "scratch" has nothing.
func testBase(ref string) (metadata.ImageConfig, error) {
	switch {
	case ref == "scratch":
		return metadata.ImageConfig{}, nil
	case ref == "base" || strings.HasPrefix(ref, "base:"):
		return metadata.ImageConfig{
			Env:          []string{"PATH=/usr/bin:/bin", "HOME=/root"},
			Cmd:          []string{"sh"},
			ExposedPorts: []int{22},
		}, nil
	}
	return metadata.ImageConfig{}, errNoImage
}

// plan parses and plans src.
func plan(t *testing.T, src string, args map[string]string) ([]Step, []string, error) {
	t.Helper()
	df, err := Parse(strings.NewReader(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return Plan(df, args, testBase)
}

// mustPlan plans src, which must succeed.
func mustPlan(t *testing.T, src string, args map[string]string) ([]Step, []string) {
	t.Helper()
	steps, warnings, err := plan(t, src, args)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	return steps, warnings
}

// last is the last step of a plan.
func last(steps []Step) Step { return steps[len(steps)-1] }

func TestPlanTexts(t *testing.T) {
	src := `# syntax=docker/dockerfile:1
ARG TAG=1
FROM base:${TAG} AS app
ARG TAG
ARG USERNAME=app
ENV APP=/srv/app \
    PATH=$PATH:/opt/bin
WORKDIR $APP
COPY --chown=${USERNAME}:${USERNAME} --chmod=755 ./bin/ conf/*.toml ./
ADD ["a.tar", "b c", "/dst/"]
RUN apt-get update && \
    apt-get install -y curl
RUN ["echo", "$HOME"]
LABEL org.example.v="1 2" x=y
MAINTAINER someone
USER ${USERNAME}:staff
EXPOSE 8080 9000-9001/tcp
ENTRYPOINT ["/srv/app/bin/run"]
CMD run --help
`
	steps, warnings := mustPlan(t, src, nil)
	want := []string{
		"FROM base:1",
		"ARG TAG=1",
		"ARG USERNAME=app",
		"ENV APP=/srv/app PATH=/usr/bin:/bin:/opt/bin",
		"WORKDIR /srv/app",
		"COPY --chown=app:app --chmod=0755 [bin conf/*.toml] /srv/app/",
		`ADD [a.tar "b c"] /dst/`,
		"RUN apt-get update &&     apt-get install -y curl",
		`RUN ["echo","$HOME"]`,
		`LABEL org.example.v="1 2" x=y`,
		"MAINTAINER someone",
		"USER app:staff",
		"EXPOSE 8080 9000-9001/tcp",
		`ENTRYPOINT ["/srv/app/bin/run"]`,
		"CMD run --help",
	}
	var got []string
	for _, s := range steps {
		got = append(got, s.Text)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("texts:\n%q\nwant\n%q", got, want)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings: %q", warnings)
	}
	kinds := []StepKind{FromStep, ConfigStep, ConfigStep, ConfigStep, ConfigStep, CopyStep, CopyStep, RunStep, RunStep, ConfigStep, ConfigStep, ConfigStep, ConfigStep, ConfigStep, ConfigStep}
	lines := []int{3, 4, 5, 6, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19}
	for i, s := range steps {
		if s.Kind != kinds[i] || s.Line != lines[i] {
			t.Errorf("step %d (%s): kind %v line %d, want %v line %d", i, s.Text, s.Kind, s.Line, kinds[i], lines[i])
		}
	}
	// A second plan of the same input is the same.
	again, _ := mustPlan(t, src, nil)
	if !reflect.DeepEqual(steps, again) {
		t.Error("two plans of the same Dockerfile differ")
	}
	final := last(steps).Config
	wantCfg := metadata.ImageConfig{
		Env:          []string{"PATH=/usr/bin:/bin:/opt/bin", "HOME=/root", "APP=/srv/app"},
		Entrypoint:   []string{"/srv/app/bin/run"},
		Cmd:          []string{"/bin/sh", "-c", "run --help"},
		WorkingDir:   "/srv/app",
		User:         "app:staff",
		ExposedPorts: []int{22, 8080, 9000, 9001},
	}
	if !reflect.DeepEqual(final, wantCfg) {
		t.Errorf("final config\n%+v\nwant\n%+v", final, wantCfg)
	}
	if s := steps[0]; s.Base != "base:1" || !reflect.DeepEqual(s.Config.Cmd, []string{"sh"}) {
		t.Errorf("FROM step: %+v", s)
	}
	if s := steps[7]; !reflect.DeepEqual(s.Args, []string{"/bin/sh", "-c", "apt-get update &&     apt-get install -y curl"}) ||
		!reflect.DeepEqual(s.Env, []string{"PATH=/usr/bin:/bin:/opt/bin", "HOME=/root", "APP=/srv/app", "TAG=1", "USERNAME=app"}) {
		t.Errorf("RUN step: args %q env %q", s.Args, s.Env)
	}
	if s := steps[8]; !reflect.DeepEqual(s.Args, []string{"echo", "$HOME"}) {
		t.Errorf("exec RUN is expanded: %q", s.Args)
	}
	if s := steps[9]; !reflect.DeepEqual(s.Labels, []string{"org.example.v=1 2", "x=y"}) {
		t.Errorf("labels %q", s.Labels)
	}
	if s := steps[4]; s.MakeDir != "/srv/app" {
		t.Errorf("WORKDIR MakeDir %q", s.MakeDir)
	}
}

func TestPlanConfigsAreSnapshots(t *testing.T) {
	steps, _ := mustPlan(t, "FROM base\nENV A=1\nENV B=2\nEXPOSE 80\nEXPOSE 81", nil)
	if got := steps[1].Config.Env; !reflect.DeepEqual(got, []string{"PATH=/usr/bin:/bin", "HOME=/root", "A=1"}) {
		t.Errorf("after ENV A: %q", got)
	}
	steps[1].Config.Env[0] = "CHANGED=1"
	steps[3].Config.ExposedPorts[0] = 1
	if steps[2].Config.Env[0] != "PATH=/usr/bin:/bin" || steps[4].Config.ExposedPorts[0] != 22 {
		t.Error("steps share their configs' slices")
	}
	if got := steps[4].Config.ExposedPorts; !reflect.DeepEqual(got, []int{22, 80, 81}) {
		t.Errorf("ports %v", got)
	}
}

func TestPlanEnv(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // the final Env after the base's PATH and HOME
	}{
		{"key=value pairs with quotes", `ENV A="x y" B=z C='$HOME' D=\$HOME E="$HOME"`, []string{"A=x y", "B=z", "C=$HOME", "D=$HOME", "E=/root"}},
		{"legacy form", "ENV GREETING hello  big world", []string{"GREETING=hello  big world"}},
		{"legacy form with quotes and variables", `ENV G "hi there" $HOME`, []string{"G=hi there /root"}},
		{"pairs see the values from before", "ENV A=1\nENV A=2 B=$A", []string{"A=2", "B=1"}},
		{"chaining", "ENV A=1\nENV B=${A}2\nENV C=${B}3", []string{"A=1", "B=12", "C=123"}},
		{"replacing keeps the place", "ENV HOME=/home/x X=$HOME", []string{"X=/root"}},
		{"ARG seen by ENV", "ARG V=7\nENV W=v$V", []string{"W=v7"}},
		{"ENV overrides ARG", "ARG V=7\nENV V=8\nENV W=$V", []string{"V=8", "W=8"}},
		{"default forms", "ENV A=${UNSET:-d} B=${HOME:+set} C=${UNSET:+x}", []string{"A=d", "B=set", "C="}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			steps, _ := mustPlan(t, "FROM base\n"+tt.src, nil)
			env := last(steps).Config.Env
			home := "HOME=/root"
			if strings.Contains(tt.name, "replacing") {
				home = "HOME=/home/x"
			}
			want := append([]string{"PATH=/usr/bin:/bin", home}, tt.want...)
			if !reflect.DeepEqual(env, want) {
				t.Errorf("Env %q, want %q", env, want)
			}
		})
	}
}

func TestPlanArgs(t *testing.T) {
	tests := []struct {
		name     string
		src      string
		args     map[string]string
		base     string   // of the FROM step
		env      []string // of the last (RUN) step, after the base's PATH and HOME
		warnings []string
	}{
		{name: "ARG before FROM only in FROM", src: "ARG V=1\nFROM base:$V\nENV X=[$V]\nRUN x", base: "base:1", env: []string{"X=[]"}},
		{name: "redeclared after FROM takes the outer value", src: "ARG V=1\nFROM base:$V\nARG V\nRUN x", base: "base:1", env: []string{"V=1"}},
		{name: "build arg overrides both", src: "ARG V=1\nFROM base:$V\nARG V\nRUN x", args: map[string]string{"V": "2"}, base: "base:2", env: []string{"V=2"}},
		{name: "default after FROM", src: "FROM base\nARG V=d\nRUN x", base: "base", env: []string{"V=d"}},
		{name: "default after FROM overridden", src: "FROM base\nARG V=d\nRUN x", args: map[string]string{"V": "o"}, base: "base", env: []string{"V=o"}},
		{name: "inner default beats outer", src: "ARG V=outer\nFROM base\nARG V=inner\nRUN x", base: "base", env: []string{"V=inner"}},
		{name: "no value: not in RUN's env", src: "FROM base\nARG V\nRUN x", base: "base"},
		{name: "empty value is a value", src: "FROM base\nARG V=\nRUN x", base: "base", env: []string{"V="}},
		{name: "several in one ARG, seeing what came before", src: "FROM base\nARG A=1\nARG B=$A C=${A}2\nRUN x", base: "base", env: []string{"A=1", "B=1", "C=12"}},
		{name: "an ENV of the same name wins", src: "FROM base\nARG A=1\nENV A=2\nRUN x", base: "base", env: []string{"A=2"}},
		{name: "ARG in a later instruction's word", src: "FROM base\nARG D=/w\nWORKDIR $D\nRUN x", base: "base", env: []string{"D=/w"}},
		{name: "RUN is not expanded", src: "FROM base\nARG A=1\nRUN echo $A", base: "base", env: []string{"A=1"}},
		{name: "undeclared build args warned of", src: "FROM base\nRUN x", args: map[string]string{"ZED": "1", "ALPHA": "2"}, base: "base",
			warnings: []string{"build arg ALPHA was given but no ARG declares it: not used", "build arg ZED was given but no ARG declares it: not used"}},
		{name: "declared before FROM counts as used", src: "ARG A\nFROM base\nRUN x", args: map[string]string{"A": "1"}, base: "base"},
		{name: "proxy args need no ARG and reach RUN", src: "FROM base\nRUN x", args: map[string]string{"https_proxy": "s", "HTTP_PROXY": "h"}, base: "base", env: []string{"HTTP_PROXY=h", "https_proxy=s"}},
		{name: "automatic platform args", src: "FROM base:$TARGETARCH\nARG TARGETOS\nRUN x", args: map[string]string{"TARGETARCH": "s390x"}, base: "base:" + runtime.GOARCH, env: []string{"TARGETOS=linux"},
			warnings: []string{"build arg TARGETARCH ignored: cairn sets it (it builds for " + Platform + " only)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			steps, warnings := mustPlan(t, tt.src, tt.args)
			if steps[0].Base != tt.base {
				t.Errorf("Base %q, want %q", steps[0].Base, tt.base)
			}
			run := last(steps)
			if run.Kind != RunStep {
				t.Fatalf("last step %s is not a RUN", run.Text)
			}
			want := append([]string{"PATH=/usr/bin:/bin", "HOME=/root"}, tt.env...)
			if strings.Contains(tt.name, "ENV of the same") {
				want = []string{"PATH=/usr/bin:/bin", "HOME=/root", "A=2"}
			}
			if !reflect.DeepEqual(run.Env, want) {
				t.Errorf("RUN env %q, want %q", run.Env, want)
			}
			if strings.Contains(tt.name, "not expanded") && run.Args[2] != "echo $A" {
				t.Errorf("RUN args %q", run.Args)
			}
			if !reflect.DeepEqual(warnings, tt.warnings) {
				t.Errorf("warnings %q, want %q", warnings, tt.warnings)
			}
		})
	}
}

func TestPlanWorkdir(t *testing.T) {
	steps, _ := mustPlan(t, "FROM scratch\nWORKDIR rel\nWORKDIR /a\nWORKDIR b/\nWORKDIR ../c\nWORKDIR \"/with space\"\nWORKDIR /\nWORKDIR ..", nil)
	want := []string{"/rel", "/a", "/a/b", "/a/c", "/with space", "/", "/"}
	for i, w := range want {
		s := steps[i+1]
		if s.MakeDir != w || s.Config.WorkingDir != w {
			t.Errorf("%s: MakeDir %q WorkingDir %q, want %q", s.Text, s.MakeDir, s.Config.WorkingDir, w)
		}
	}
	if got := steps[5].Text; got != `WORKDIR "/with space"` {
		t.Errorf("text %q", got)
	}
}

func TestPlanCopy(t *testing.T) {
	mode := func(m uint32) *uint32 { return &m }
	tests := []struct {
		src     string
		sources []string
		dest    string
		chown   string
		chmod   *uint32
		add     bool
	}{
		{src: "COPY . .", sources: []string{"."}, dest: "/app/"},
		{src: "COPY a b", sources: []string{"a"}, dest: "/app/b"},
		{src: "COPY a /abs", sources: []string{"a"}, dest: "/abs"},
		{src: "COPY a ..", sources: []string{"a"}, dest: "/"},
		{src: "COPY a sub/..", sources: []string{"a"}, dest: "/app/"},
		{src: "COPY ./src//x.go /src/../y/*.txt / dir/", sources: []string{"src/x.go", "y/*.txt", "."}, dest: "/app/dir/"},
		{src: `COPY "a b" 'c d' /d/`, sources: []string{"a b", "c d"}, dest: "/d/"},
		{src: `COPY ["a b", "$F", "/d/"]`, sources: []string{"a b", "f.txt"}, dest: "/d/"},
		{src: "COPY $F ${D}", sources: []string{"f.txt"}, dest: "/dest/"},
		{src: "COPY --chown=$U:$U --chmod=640 a /x", sources: []string{"a"}, dest: "/x", chown: "u:u", chmod: mode(0o640)},
		{src: "COPY --chmod=04755 a /x", sources: []string{"a"}, dest: "/x", chmod: mode(0o4755)},
		{src: "COPY --link a /x", sources: []string{"a"}, dest: "/x"},
		{src: "ADD --chown=1 a.tar.gz /", sources: []string{"a.tar.gz"}, dest: "/", chown: "1", add: true},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			steps, _ := mustPlan(t, "FROM scratch\nARG F=f.txt D=/dest/ U=u\nWORKDIR /app\n"+tt.src, nil)
			s := last(steps)
			if s.Kind != CopyStep || !reflect.DeepEqual(s.Sources, tt.sources) || s.Dest != tt.dest || s.Chown != tt.chown || s.Add != tt.add ||
				(s.Chmod == nil) != (tt.chmod == nil) || (s.Chmod != nil && *s.Chmod != *tt.chmod) {
				t.Errorf("got %+v", s)
			}
		})
	}
}

func TestPlanCommands(t *testing.T) {
	sh := func(s string) []string { return []string{"/bin/sh", "-c", s} }
	tests := []struct {
		name            string
		src             string
		entrypoint, cmd []string
	}{
		{"inherited", "", nil, []string{"sh"}},
		{"CMD exec", `CMD ["a", "b"]`, nil, []string{"a", "b"}},
		{"CMD shell", "CMD echo $HOME", nil, sh("echo $HOME")},
		{"CMD [] clears", "CMD []", nil, nil},
		{"ENTRYPOINT resets the base's CMD", `ENTRYPOINT ["/e"]`, []string{"/e"}, nil},
		{"ENTRYPOINT shell", "ENTRYPOINT exec /e", sh("exec /e"), nil},
		{"ENTRYPOINT keeps this file's CMD", "CMD [\"c\"]\nENTRYPOINT [\"/e\"]", []string{"/e"}, []string{"c"}},
		{"CMD after ENTRYPOINT", "ENTRYPOINT [\"/e\"]\nCMD [\"c\"]", []string{"/e"}, []string{"c"}},
		{"last one wins", "CMD a\nCMD [\"b\"]", nil, []string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			steps, _ := mustPlan(t, "FROM base\n"+tt.src, nil)
			cfg := last(steps).Config
			if !reflect.DeepEqual(cfg.Entrypoint, tt.entrypoint) || !reflect.DeepEqual(cfg.Cmd, tt.cmd) {
				t.Errorf("entrypoint %q cmd %q, want %q %q", cfg.Entrypoint, cfg.Cmd, tt.entrypoint, tt.cmd)
			}
		})
	}
}

func TestPlanExpose(t *testing.T) {
	steps, warnings := mustPlan(t, "FROM base\nARG P=8080\nEXPOSE 80 443/tcp 22 8000-8002 53/udp 9/SCTP $P 80/TCP", nil)
	if got, want := last(steps).Config.ExposedPorts, []int{22, 80, 443, 8000, 8001, 8002, 8080}; !reflect.DeepEqual(got, want) {
		t.Errorf("ports %v, want %v", got, want)
	}
	wantW := []string{"Dockerfile:3: EXPOSE 53/udp ignored: cairn keeps TCP ports only", "Dockerfile:3: EXPOSE 9/SCTP ignored: cairn keeps TCP ports only"}
	if !reflect.DeepEqual(warnings, wantW) {
		t.Errorf("warnings %q", warnings)
	}
	steps, _ = mustPlan(t, "FROM base\nARG PS=\"1 2\"\nEXPOSE $PS", nil)
	if got := last(steps).Config.ExposedPorts; !reflect.DeepEqual(got, []int{22, 1, 2}) {
		t.Errorf("ports from a variable with a space: %v", got)
	}
}

func TestPlanUser(t *testing.T) {
	for src, want := range map[string]string{"USER app": "app", "USER 1000": "1000", "USER app:staff": "app:staff", "USER 1:2": "1:2", "ARG U=x\nUSER $U:$U": "x:x"} {
		steps, _ := mustPlan(t, "FROM base\n"+src, nil)
		if got := last(steps).Config.User; got != want {
			t.Errorf("%s: User %q, want %q", src, got, want)
		}
	}
}

func TestPlanPlatform(t *testing.T) {
	for _, src := range []string{"FROM --platform=" + Platform + " base", "FROM --platform=$BUILDPLATFORM base", "FROM --platform=${TARGETOS}/${TARGETARCH} base", "ARG P=" + Platform + "\nFROM --platform=$P base"} {
		if _, _, err := plan(t, src, nil); err != nil {
			t.Errorf("%s: %v", src, err)
		}
	}
	other := "linux/s390x"
	if runtime.GOARCH == "s390x" {
		other = "linux/amd64"
	}
	_, _, err := plan(t, "FROM --platform="+other+" base", nil)
	if err == nil || err.Error() != "Dockerfile:1: FROM --platform="+other+": cairn builds only for "+Platform {
		t.Errorf("other platform: %v", err)
	}
}

func TestPlanBaseError(t *testing.T) {
	_, _, err := plan(t, "ARG A\nFROM nothere", nil)
	var e *Error
	if !errors.Is(err, errNoImage) || !errors.As(err, &e) || e.Line != 2 || err.Error() != "Dockerfile:2: FROM nothere: no such image" {
		t.Errorf("got %v", err)
	}
	df, err := Parse(strings.NewReader("FROM a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Plan(df, nil, nil); err == nil {
		t.Error("Plan without a base callback succeeded")
	}
	if _, _, err := Plan(nil, nil, testBase); err == nil {
		t.Error("Plan of nil succeeded")
	}
}

func TestPlanErrors(t *testing.T) {
	tests := []struct{ src, want string }{
		{"ARG B\nFROM $B", `Dockerfile:2: FROM $B: "" is not an image name`},
		{"FROM base AS", "Dockerfile:1: FROM takes an image and optionally AS name: FROM image [AS name]"},
		{"FROM base x y", "Dockerfile:1: FROM takes an image and optionally AS name: FROM image [AS name]"},
		{"FROM base:${V", "Dockerfile:1: FROM: syntax error: missing '}'"},
		{"FROM base\nENV A=${B", "Dockerfile:2: ENV: syntax error: missing '}'"},
		{"FROM base\nENV A='x", "Dockerfile:2: ENV: unexpected end of text looking for the closing single quote"},
		{"FROM base\nENV $E=1", `Dockerfile:2: ENV: "" is not a name`},
		{"FROM base\nLABEL a=${x:?needed}", "Dockerfile:2: LABEL: x: needed"},
		{"FROM base\nCOPY a b c", "Dockerfile:2: COPY with more than one source needs a destination directory ending in /, not /c"},
		{"FROM base\nCOPY ../x /", "Dockerfile:2: COPY ../x: the source is outside the build context"},
		{"FROM base\nCOPY a/../../x /", "Dockerfile:2: COPY a/../../x: the source is outside the build context"},
		{"FROM base\nCOPY \"\" /", "Dockerfile:2: COPY : an empty source"},
		{"FROM base\nCOPY a $NONE", "Dockerfile:2: COPY: the destination is empty"},
		{"FROM base\nADD https://example.com/x.tgz /", "Dockerfile:2: ADD of a URL (https://example.com/x.tgz) is not supported by cairn image build: download it in a RUN step"},
		{"FROM base\nADD git@github.com:a/b.git /", "Dockerfile:2: ADD of a URL (git@github.com:a/b.git) is not supported by cairn image build: download it in a RUN step"},
		{"FROM base\nCOPY http://x/y /", "Dockerfile:2: COPY http://x/y: a source cannot be a URL"},
		{"FROM base\nCOPY --chmod=u+x a /", "Dockerfile:2: COPY --chmod=u+x: not an octal mode (0000 to 7777)"},
		{"FROM base\nCOPY --chmod=17777 a /", "Dockerfile:2: COPY --chmod=17777: not an octal mode (0000 to 7777)"},
		{"FROM base\nCOPY --chown=:g a /", "Dockerfile:2: COPY --chown=:g: no user"},
		{"FROM base\nCOPY --chown=a:b:c a /", "Dockerfile:2: COPY --chown=a:b:c: not user or user:group"},
		{"FROM base\nWORKDIR $NONE", "Dockerfile:2: WORKDIR $NONE: the directory is empty"},
		{"FROM base\nUSER a b", "Dockerfile:2: USER takes one argument: user, uid, user:group or uid:gid"},
		{"FROM base\nUSER $NONE", "Dockerfile:2: USER $NONE: the user is empty"},
		{"FROM base\nUSER a:", "Dockerfile:2: USER a:: not user or user:group"},
		{"FROM base\nEXPOSE 0", "Dockerfile:2: EXPOSE 0: port 0 is out of range 1-65535"},
		{"FROM base\nEXPOSE 65536", "Dockerfile:2: EXPOSE 65536: port 65536 is out of range 1-65535"},
		{"FROM base\nEXPOSE http", `Dockerfile:2: EXPOSE http: "http" is not a port number`},
		{"FROM base\nEXPOSE +80", `Dockerfile:2: EXPOSE +80: "+80" is not a port number`},
		{"FROM base\nEXPOSE 9-8", "Dockerfile:2: EXPOSE 9-8: the range ends before it starts"},
		{"FROM base\nEXPOSE 8-", `Dockerfile:2: EXPOSE 8-: "" is not a port number`},
		{"FROM base\nEXPOSE 80/quic", `Dockerfile:2: EXPOSE 80/quic: unknown protocol "quic" (tcp, udp or sctp)`},
		{"FROM base\nEXPOSE $NONE", "Dockerfile:2: EXPOSE requires at least one port"},
	}
	for _, tt := range tests {
		_, _, err := plan(t, tt.src, nil)
		var e *Error
		if !errors.As(err, &e) || err.Error() != tt.want {
			t.Errorf("%q:\ngot  %v\nwant %s", tt.src, err, tt.want)
		}
	}
}

// TestPlanHandMade plans Dockerfiles Parse would not make: Plan must
// refuse them, not panic.
func TestPlanHandMade(t *testing.T) {
	from := Instruction{Line: 1, Cmd: "FROM", Args: "base"}
	tests := []struct {
		name string
		df   Dockerfile
	}{
		{"none", Dockerfile{}},
		{"unknown", Dockerfile{Instructions: []Instruction{from, {Line: 2, Cmd: "VOLUME", Args: "/x"}}}},
		{"RUN empty", Dockerfile{Instructions: []Instruction{from, {Line: 2, Cmd: "RUN"}}}},
		{"RUN JSON empty", Dockerfile{Instructions: []Instruction{from, {Line: 2, Cmd: "RUN", JSON: true}}}},
		{"COPY one", Dockerfile{Instructions: []Instruction{from, {Line: 2, Cmd: "COPY", JSON: true, List: []string{"a"}}}}},
		{"refused flag", Dockerfile{Instructions: []Instruction{from, {Line: 2, Cmd: "COPY", Flags: []Flag{{Name: "from", Value: "x", HasValue: true}}, Args: "a b"}}}},
		{"CMD empty", Dockerfile{Instructions: []Instruction{from, {Line: 2, Cmd: "CMD"}}}},
		{"ENV empty", Dockerfile{Instructions: []Instruction{from, {Line: 2, Cmd: "ENV"}}}},
		{"FROM empty", Dockerfile{Instructions: []Instruction{{Line: 1, Cmd: "FROM"}}}},
	}
	for _, tt := range tests {
		if _, _, err := Plan(&tt.df, nil, testBase); err == nil {
			t.Errorf("%s: Plan succeeded", tt.name)
		}
	}
}

func TestStepKindString(t *testing.T) {
	for k, want := range map[StepKind]string{FromStep: "from", RunStep: "run", CopyStep: "copy", ConfigStep: "config", 0: "StepKind(0)"} {
		if got := k.String(); got != want {
			t.Errorf("%d: %q, want %q", int(k), got, want)
		}
	}
}
