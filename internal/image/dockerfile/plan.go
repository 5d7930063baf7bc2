package dockerfile

import (
	"encoding/json"
	"fmt"
	"path"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// StepKind is what the executor does for a step.
type StepKind int

const (
	// FromStep starts the build from Step.Base (a registry reference or a
	// cairn image name, as written after expansion; "scratch" is passed
	// on as is).
	FromStep StepKind = iota + 1
	// RunStep runs Step.Args with Step.Env in the root, as Step.Config's
	// User in its WorkingDir.
	RunStep
	// CopyStep copies Step.Sources from the build context to Step.Dest
	// (COPY, and ADD with Step.Add set).
	CopyStep
	// ConfigStep changes only the image config (ENV, ARG, WORKDIR, USER,
	// EXPOSE, CMD, ENTRYPOINT, LABEL, MAINTAINER); WORKDIR also makes the
	// directory Step.MakeDir.
	ConfigStep
)

func (k StepKind) String() string {
	switch k {
	case FromStep:
		return "from"
	case RunStep:
		return "run"
	case CopyStep:
		return "copy"
	case ConfigStep:
		return "config"
	}
	return "StepKind(" + strconv.Itoa(int(k)) + ")"
}

// Step is one instruction of the build, planned: its variables expanded,
// its paths resolved, and the image config after it.
type Step struct {
	Line        int    // the line the instruction starts on
	Instruction string // the instruction word, upper case: "WORKDIR"
	// Text is the instruction as planned, for display ("Step 3/9: RUN
	// apt-get update") and for cache keys: deterministic, variables
	// expanded where Docker expands them, paths resolved, exec forms in
	// compact JSON ("RUN echo hi", `COPY --chown=1:1 [a b] /dst/`,
	// "ENV A=1 B=2", "WORKDIR /app"). It does not hold Env: a key for a
	// RunStep must hash Env as well (build args change it without
	// changing any Text).
	Text string
	Kind StepKind

	Base string // FromStep: the image to start from

	// RunStep: Args is the command, ["/bin/sh", "-c", cmd] for the shell
	// form. Env is its environment, "K=v": Config.Env, then the build args
	// in scope that ENV does not set (Docker passes ARG values to RUN
	// without keeping them in the image), then the proxy build args given
	// (HTTP_PROXY and the like, which need no ARG), sorted.
	Args []string
	Env  []string

	// CopyStep. Sources are relative to the context: cleaned, forward
	// slashes, "." for the whole context, wildcards kept as written for
	// the executor to match. Dest is absolute (a relative one is resolved
	// against the WorkingDir before the step), cleaned, and ends in "/" if
	// it was written as a directory ("dir/", ".", "..") — required with
	// more than one source. Chown is the --chown value expanded ("" is
	// root: 0:0); Chmod the --chmod value, nil if not given. Add marks an
	// ADD, whose local tar archives the executor extracts.
	Sources []string
	Dest    string
	Chown   string
	Chmod   *uint32
	Add     bool

	MakeDir string   // ConfigStep of WORKDIR: the absolute directory to make (owned by Config.User, as in Docker)
	Labels  []string // ConfigStep of LABEL: the labels it sets, "k=v" (metadata.ImageConfig keeps none)

	Config metadata.ImageConfig // the image config after this step; its slices are the step's own
}

// Platform is the only platform cairn builds for, and the value of FROM
// --platform it accepts: linux and the architecture cairn was built for.
const Platform = "linux/" + runtime.GOARCH

// automaticArgs are the build args Docker defines for the platform,
// usable in FROM and, once declared with ARG, in the stage. They cannot
// be overridden: cairn builds for Platform only.
var automaticArgs = map[string]string{
	"TARGETPLATFORM": Platform, "TARGETOS": "linux", "TARGETARCH": runtime.GOARCH,
	"BUILDPLATFORM": Platform, "BUILDOS": "linux", "BUILDARCH": runtime.GOARCH,
}

// proxyArgs are the build args usable without an ARG; RUN sees them.
var proxyArgs = map[string]bool{
	"HTTP_PROXY": true, "http_proxy": true, "HTTPS_PROXY": true, "https_proxy": true,
	"FTP_PROXY": true, "ftp_proxy": true, "NO_PROXY": true, "no_proxy": true,
	"ALL_PROXY": true, "all_proxy": true,
}

// Plan turns a parsed Dockerfile into the steps of its build, in order,
// each with the config after it. buildArgs are the --build-arg values;
// base gives the config of the image FROM names (its error is returned
// inside an *Error for FROM's line). The warnings are for the user: build
// args no ARG declares, EXPOSE of a non-TCP port. Every error is an
// *Error naming the line.
//
// ARGs before FROM are usable only in FROM and are not steps; ARGs after
// it take their default, overridden by a build arg, or (declared without
// a default) the value of the same ARG before FROM. Variables are
// expanded against the config's Env first, then the ARGs in scope; all
// the pairs of one ENV, LABEL or ARG see the values from before it.
func Plan(df *Dockerfile, buildArgs map[string]string, base func(ref string) (metadata.ImageConfig, error)) ([]Step, []string, error) {
	if df == nil {
		return nil, nil, errorf(0, "no Dockerfile")
	}
	if err := checkStage(df.Instructions); err != nil {
		return nil, nil, err
	}
	p := &planner{
		escape:    df.Escape,
		buildArgs: buildArgs,
		declared:  map[string]bool{},
		meta:      map[string]string{},
		base:      base,
	}
	if p.escape != '`' {
		p.escape = '\\'
	}
	for k, v := range automaticArgs {
		p.meta[k] = v
	}
	for i := range df.Instructions {
		inst := &df.Instructions[i]
		step, err := p.step(inst)
		if err != nil {
			return nil, nil, err
		}
		if step == nil {
			continue
		}
		step.Line, step.Instruction = inst.Line, inst.Cmd
		step.Config = cloneConfig(p.cfg)
		p.steps = append(p.steps, *step)
	}
	p.warnUnused()
	return p.steps, p.warnings, nil
}

// planner is the state of one Plan.
type planner struct {
	escape    rune
	buildArgs map[string]string
	base      func(ref string) (metadata.ImageConfig, error)
	declared  map[string]bool   // names some ARG declares
	meta      map[string]string // the set ARGs before FROM, and automaticArgs
	staged    bool              // FROM is done
	args      []arg             // the ARGs after FROM, in order of declaration
	cfg       metadata.ImageConfig
	cmdSet    bool // a CMD of this Dockerfile, not the base's, is in cfg
	warnings  []string
	steps     []Step
}

// arg is an ARG in scope after FROM.
type arg struct {
	name, value string
	set         bool // it has a value (a default, a build arg, or the ARG before FROM)
}

// step plans one instruction; ARGs before FROM give no step (nil).
func (p *planner) step(inst *Instruction) (*Step, error) {
	switch inst.Cmd {
	case "FROM":
		return p.from(inst)
	case "ARG":
		return p.arg(inst)
	case "RUN":
		return p.run(inst)
	case "COPY", "ADD":
		return p.copy(inst)
	case "ENV":
		return p.env(inst)
	case "LABEL":
		return p.label(inst)
	case "MAINTAINER":
		return &Step{Kind: ConfigStep, Text: "MAINTAINER " + inst.Args}, nil
	case "WORKDIR":
		return p.workdir(inst)
	case "USER":
		return p.user(inst)
	case "EXPOSE":
		return p.expose(inst)
	case "CMD", "ENTRYPOINT":
		return p.command(inst)
	}
	return nil, notSupported(inst.Line, inst.Cmd)
}

// lookup gives a variable's value as the instructions after FROM see it:
// the config's Env, then the ARGs in scope. Before FROM only the ARGs
// before FROM (and automaticArgs) are seen.
func (p *planner) lookup(name string) (string, bool) {
	if !p.staged {
		v, ok := p.meta[name]
		return v, ok
	}
	if v, ok := envGet(p.cfg.Env, name); ok {
		return v, true
	}
	for _, a := range p.args {
		if a.name == name {
			return a.value, a.set
		}
	}
	return "", false
}

// expand expands one word for inst, an error naming inst's line.
func (p *planner) expand(inst *Instruction, word string) (string, error) {
	s, err := expandWord(word, p.escape, p.lookup)
	if err != nil {
		return "", errorf(inst.Line, "%s: %v", inst.Cmd, err)
	}
	return s, nil
}

// flag returns inst's flag name, expanded, and whether it is there.
func (p *planner) flag(inst *Instruction, name string) (string, bool, error) {
	for _, f := range inst.Flags {
		if f.Name == name {
			v, err := p.expand(inst, f.Value)
			return v, true, err
		}
	}
	return "", false, nil
}

// checkFlags refuses flags inst's instruction does not take (Parse does
// too; Plan checks again for a Dockerfile not made by Parse).
func checkFlags(inst *Instruction) error {
	for _, f := range inst.Flags {
		if k, ok := flagRules[inst.Cmd][f.Name]; !ok || k == flagRefused {
			return errorf(inst.Line, "%s --%s is not supported by cairn image build", inst.Cmd, f.Name)
		}
	}
	return nil
}

func (p *planner) from(inst *Instruction) (*Step, error) {
	if err := checkFlags(inst); err != nil {
		return nil, err
	}
	if plat, ok, err := p.flag(inst, "platform"); err != nil {
		return nil, err
	} else if ok && !strings.EqualFold(plat, Platform) {
		return nil, errorf(inst.Line, "FROM --platform=%s: cairn builds only for %s", plat, Platform)
	}
	words := splitRaw(inst.Args, p.escape)
	if len(words) != 1 && (len(words) != 3 || !strings.EqualFold(words[1], "AS")) {
		return nil, errorf(inst.Line, "FROM takes an image and optionally AS name: FROM image [AS name]")
	}
	ref, err := p.expand(inst, words[0])
	if err != nil {
		return nil, err
	}
	if ref == "" || strings.ContainsFunc(ref, isSpace) {
		return nil, errorf(inst.Line, "FROM %s: %q is not an image name", words[0], ref)
	}
	p.staged = true
	if p.base == nil {
		return nil, errorf(inst.Line, "FROM %s: no way to find the image's config", ref)
	}
	cfg, err := p.base(ref)
	if err != nil {
		return nil, &Error{Line: inst.Line, Msg: "FROM " + ref, Err: err}
	}
	p.cfg = cloneConfig(cfg)
	return &Step{Kind: FromStep, Text: "FROM " + ref, Base: ref}, nil
}

func (p *planner) run(inst *Instruction) (*Step, error) {
	if err := checkFlags(inst); err != nil {
		return nil, err
	}
	var argv []string
	text := "RUN " + inst.Args
	if inst.JSON {
		argv = append([]string(nil), inst.List...)
		text = "RUN " + compactJSON(argv)
	} else if strings.TrimSpace(inst.Args) != "" {
		argv = []string{"/bin/sh", "-c", inst.Args}
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, errorf(inst.Line, "RUN has no command")
	}
	return &Step{Kind: RunStep, Text: text, Args: argv, Env: p.runEnv()}, nil
}

// runEnv is the environment of a RUN: see Step.Env.
func (p *planner) runEnv() []string {
	env := append([]string(nil), p.cfg.Env...)
	for _, a := range p.args {
		if _, inEnv := envGet(p.cfg.Env, a.name); a.set && !inEnv {
			env = append(env, a.name+"="+a.value)
		}
	}
	var proxies []string
	for name, v := range p.buildArgs {
		if _, inEnv := envGet(p.cfg.Env, name); proxyArgs[name] && !p.declared[name] && !inEnv {
			proxies = append(proxies, name+"="+v)
		}
	}
	sort.Strings(proxies)
	return append(env, proxies...)
}

func (p *planner) copy(inst *Instruction) (*Step, error) {
	if err := checkFlags(inst); err != nil {
		return nil, err
	}
	step := &Step{Kind: CopyStep, Add: inst.Cmd == "ADD"}
	var err error
	if step.Chown, _, err = p.flag(inst, "chown"); err != nil {
		return nil, err
	}
	if err := checkChown(step.Chown); err != nil {
		return nil, errorf(inst.Line, "%s --chown=%s: %v", inst.Cmd, step.Chown, err)
	}
	if mode, ok, err := p.flag(inst, "chmod"); err != nil {
		return nil, err
	} else if ok {
		m, err := strconv.ParseUint(mode, 8, 32)
		if err != nil || m > 0o7777 {
			return nil, errorf(inst.Line, "%s --chmod=%s: not an octal mode (0000 to 7777)", inst.Cmd, mode)
		}
		m32 := uint32(m)
		step.Chmod = &m32
	}
	raw := inst.List
	if !inst.JSON {
		raw = splitRaw(inst.Args, p.escape)
	}
	if len(raw) < 2 {
		return nil, errorf(inst.Line, "%s requires at least one source and a destination", inst.Cmd)
	}
	words := make([]string, len(raw))
	for i, w := range raw {
		if words[i], err = p.expand(inst, w); err != nil {
			return nil, err
		}
	}
	for _, src := range words[:len(words)-1] {
		if isURL(src) {
			if step.Add {
				return nil, errorf(inst.Line, "ADD of a URL (%s) is not supported by cairn image build: download it in a RUN step", src)
			}
			return nil, errorf(inst.Line, "COPY %s: a source cannot be a URL", src)
		}
		s, err := cleanSource(src)
		if err != nil {
			return nil, errorf(inst.Line, "%s %s: %v", inst.Cmd, src, err)
		}
		step.Sources = append(step.Sources, s)
	}
	step.Dest = p.resolveDest(words[len(words)-1])
	if step.Dest == "" {
		return nil, errorf(inst.Line, "%s: the destination is empty", inst.Cmd)
	}
	if len(step.Sources) > 1 && !strings.HasSuffix(step.Dest, "/") {
		return nil, errorf(inst.Line, "%s with more than one source needs a destination directory ending in /, not %s", inst.Cmd, step.Dest)
	}
	text := inst.Cmd
	if step.Chown != "" {
		text += " --chown=" + quoteWord(step.Chown)
	}
	if step.Chmod != nil {
		text += fmt.Sprintf(" --chmod=%04o", *step.Chmod)
	}
	step.Text = text + " [" + quoteWords(step.Sources) + "] " + quoteWord(step.Dest)
	return step, nil
}

// cleanSource makes a COPY source relative to the context: "./a//b" is
// "a/b", "/a" is "a", "." and "/" are ".". A source that climbs out of
// the context ("../x") is an error.
func cleanSource(src string) (string, error) {
	if src == "" {
		return "", fmt.Errorf("an empty source")
	}
	if c := path.Clean(src); c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("the source is outside the build context")
	}
	c := strings.TrimPrefix(path.Clean("/"+src), "/")
	if c == "" {
		return ".", nil
	}
	return c, nil
}

// isURL reports whether a source is a URL or a git address, which ADD
// would fetch.
func isURL(src string) bool {
	return strings.Contains(src, "://") || strings.HasPrefix(src, "git@")
}

// resolveDest makes a destination absolute against the WorkingDir and
// keeps a directory's trailing "/" (see Step.Dest); "" stays "".
func (p *planner) resolveDest(d string) string {
	if d == "" {
		return ""
	}
	dir := strings.HasSuffix(d, "/") || d == "." || d == ".." || strings.HasSuffix(d, "/.") || strings.HasSuffix(d, "/..")
	if !path.IsAbs(d) {
		wd := p.cfg.WorkingDir
		if wd == "" {
			wd = "/"
		}
		d = path.Join(wd, d)
	}
	d = path.Clean("/" + d)
	if dir && d != "/" {
		d += "/"
	}
	return d
}

// checkChown checks the form of a --chown value: "", "user", "user:group".
func checkChown(s string) error {
	if s == "" {
		return nil
	}
	user, group, has := strings.Cut(s, ":")
	switch {
	case user == "":
		return fmt.Errorf("no user")
	case has && (group == "" || strings.Contains(group, ":")):
		return fmt.Errorf("not user or user:group")
	case strings.ContainsFunc(s, isSpace):
		return fmt.Errorf("a space in a user or group")
	}
	return nil
}

// compactJSON is a list as a compact JSON array, for Step.Text.
func compactJSON(list []string) string {
	if list == nil {
		list = []string{}
	}
	b, _ := json.Marshal(list) // a []string always marshals
	return string(b)
}

// quoteWord shows a word in Step.Text: as it is if it is plain, else
// quoted (Go syntax), so that different steps never read the same.
func quoteWord(s string) string {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool {
		return isSpace(r) || r == '"' || r == '\'' || r == '\\' || r == '[' || r == ']' || r == '=' || !strconv.IsPrint(r)
	}) {
		return strconv.Quote(s)
	}
	return s
}

// quoteWords joins words quoted by quoteWord with spaces.
func quoteWords(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = quoteWord(w)
	}
	return strings.Join(q, " ")
}

// cloneConfig copies c so that no slice is shared.
func cloneConfig(c metadata.ImageConfig) metadata.ImageConfig {
	c.Env = cloneStrings(c.Env)
	c.Entrypoint = cloneStrings(c.Entrypoint)
	c.Cmd = cloneStrings(c.Cmd)
	if c.ExposedPorts != nil {
		c.ExposedPorts = append([]int(nil), c.ExposedPorts...)
	}
	return c
}

// cloneStrings copies s; nil stays nil.
func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s...)
}

// warnUnused warns of the build args no ARG declares (proxy args need
// none) and of those cairn sets itself (automaticArgs).
func (p *planner) warnUnused() {
	var names []string
	for name := range p.buildArgs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, auto := automaticArgs[name]; auto {
			p.warnings = append(p.warnings, fmt.Sprintf("build arg %s ignored: cairn sets it (it builds for %s only)", name, Platform))
		} else if !p.declared[name] && !proxyArgs[name] {
			p.warnings = append(p.warnings, fmt.Sprintf("build arg %s was given but no ARG declares it: not used", name))
		}
	}
}
