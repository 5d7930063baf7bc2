package dockerfile

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// This file plans the instructions that change only the config: ARG,
// ENV, LABEL, WORKDIR, USER, EXPOSE, CMD and ENTRYPOINT.

// isSpace is unicode.IsSpace, for strings.ContainsFunc.
func isSpace(r rune) bool { return unicode.IsSpace(r) }

// envGet looks up key in env ("K=v"); the first entry counts.
func envGet(env []string, key string) (string, bool) {
	for _, e := range env {
		if k, v, _ := strings.Cut(e, "="); k == key {
			return v, true
		}
	}
	return "", false
}

// envSet sets key in env, in place if it is there, else at the end.
func envSet(env []string, key, value string) []string {
	for i, e := range env {
		if k, _, _ := strings.Cut(e, "="); k == key {
			env[i] = key + "=" + value
			return env
		}
	}
	return append(env, key+"="+value)
}

// pairs reads and expands inst's key=value pairs, all against the values
// from before inst.
func (p *planner) pairs(inst *Instruction) ([]keyValue, error) {
	kvs, err := keyValues(inst, p.escape)
	if err != nil {
		return nil, err
	}
	for i := range kvs {
		if kvs[i].Key, err = p.expand(inst, kvs[i].Key); err != nil {
			return nil, err
		}
		if kvs[i].Key == "" || strings.ContainsAny(kvs[i].Key, "=") || strings.ContainsFunc(kvs[i].Key, isSpace) {
			return nil, errorf(inst.Line, "%s: %q is not a name", inst.Cmd, kvs[i].Key)
		}
		if kvs[i].HasValue {
			if kvs[i].Value, err = p.expand(inst, kvs[i].Value); err != nil {
				return nil, err
			}
		}
	}
	return kvs, nil
}

// kvText shows pairs in Step.Text: "K=v K2" (v quoted if need be).
func kvText(cmd string, kvs []keyValue) string {
	var b strings.Builder
	b.WriteString(cmd)
	for _, kv := range kvs {
		b.WriteString(" " + quoteWord(kv.Key))
		if kv.HasValue {
			b.WriteString("=" + quoteWord(kv.Value))
		}
	}
	return b.String()
}

// arg declares build args. Before FROM it gives no step.
func (p *planner) arg(inst *Instruction) (*Step, error) {
	kvs, err := p.pairs(inst)
	if err != nil {
		return nil, err
	}
	for i, kv := range kvs {
		a := arg{name: kv.Key, value: kv.Value, set: kv.HasValue}
		auto, isAuto := automaticArgs[a.name]
		given, isGiven := p.buildArgs[a.name]
		outer, isOuter := p.meta[a.name]
		switch {
		case isAuto:
			a.value, a.set = auto, true
		case isGiven:
			a.value, a.set = given, true
		case !kv.HasValue && p.staged && isOuter:
			a.value, a.set = outer, true
		}
		p.declared[a.name] = true
		kvs[i] = keyValue{Key: a.name, Value: a.value, HasValue: a.set}
		if !p.staged {
			if a.set {
				p.meta[a.name] = a.value
			} else {
				delete(p.meta, a.name)
			}
			continue
		}
		p.setArg(a)
	}
	if !p.staged {
		return nil, nil
	}
	return &Step{Kind: ConfigStep, Text: kvText("ARG", kvs)}, nil
}

// setArg puts a in scope, replacing an ARG of the same name.
func (p *planner) setArg(a arg) {
	for i := range p.args {
		if p.args[i].name == a.name {
			p.args[i] = a
			return
		}
	}
	p.args = append(p.args, a)
}

func (p *planner) env(inst *Instruction) (*Step, error) {
	kvs, err := p.pairs(inst)
	if err != nil {
		return nil, err
	}
	for _, kv := range kvs {
		p.cfg.Env = envSet(p.cfg.Env, kv.Key, kv.Value)
	}
	return &Step{Kind: ConfigStep, Text: kvText("ENV", kvs)}, nil
}

func (p *planner) label(inst *Instruction) (*Step, error) {
	kvs, err := p.pairs(inst)
	if err != nil {
		return nil, err
	}
	step := &Step{Kind: ConfigStep, Text: kvText("LABEL", kvs)}
	for _, kv := range kvs {
		step.Labels = append(step.Labels, kv.Key+"="+kv.Value)
	}
	return step, nil
}

func (p *planner) workdir(inst *Instruction) (*Step, error) {
	dir, err := p.expand(inst, inst.Args)
	if err != nil {
		return nil, err
	}
	if dir == "" {
		return nil, errorf(inst.Line, "WORKDIR %s: the directory is empty", inst.Args)
	}
	dir = p.resolveDest(dir)
	if dir != "/" {
		dir = strings.TrimSuffix(dir, "/")
	}
	p.cfg.WorkingDir = dir
	return &Step{Kind: ConfigStep, Text: "WORKDIR " + quoteWord(dir), MakeDir: dir}, nil
}

func (p *planner) user(inst *Instruction) (*Step, error) {
	words := splitRaw(inst.Args, p.escape)
	if len(words) != 1 {
		return nil, errorf(inst.Line, "USER takes one argument: user, uid, user:group or uid:gid")
	}
	u, err := p.expand(inst, words[0])
	if err != nil {
		return nil, err
	}
	if u == "" {
		return nil, errorf(inst.Line, "USER %s: the user is empty", words[0])
	}
	if err := checkChown(u); err != nil {
		return nil, errorf(inst.Line, "USER %s: %v", u, err)
	}
	p.cfg.User = u
	return &Step{Kind: ConfigStep, Text: "USER " + u}, nil
}

// expose adds TCP ports to the config: "80", "80/tcp", "8000-8002".
// Other protocols are ignored with a warning: cairn keeps TCP ports only.
func (p *planner) expose(inst *Instruction) (*Step, error) {
	var words []string
	for _, raw := range splitRaw(inst.Args, p.escape) {
		w, err := p.expand(inst, raw)
		if err != nil {
			return nil, err
		}
		words = append(words, strings.Fields(w)...)
	}
	if len(words) == 0 {
		return nil, errorf(inst.Line, "EXPOSE requires at least one port")
	}
	have := map[int]bool{}
	for _, port := range p.cfg.ExposedPorts {
		have[port] = true
	}
	for _, w := range words {
		ports, proto, _ := strings.Cut(w, "/")
		switch strings.ToLower(proto) {
		case "", "tcp":
		case "udp", "sctp":
			p.warnings = append(p.warnings, fmt.Sprintf("Dockerfile:%d: EXPOSE %s ignored: cairn keeps TCP ports only", inst.Line, w))
			continue
		default:
			return nil, errorf(inst.Line, "EXPOSE %s: unknown protocol %q (tcp, udp or sctp)", w, proto)
		}
		lo, hi, err := portRange(ports)
		if err != nil {
			return nil, errorf(inst.Line, "EXPOSE %s: %v", w, err)
		}
		for port := lo; port <= hi; port++ {
			if !have[port] {
				have[port] = true
				p.cfg.ExposedPorts = append(p.cfg.ExposedPorts, port)
			}
		}
	}
	return &Step{Kind: ConfigStep, Text: "EXPOSE " + quoteWords(words)}, nil
}

// portRange reads "80" or "8000-8002" (ports 1 to 65535).
func portRange(s string) (lo, hi int, err error) {
	a, b, isRange := strings.Cut(s, "-")
	if lo, err = portNumber(a); err != nil {
		return 0, 0, err
	}
	hi = lo
	if isRange {
		if hi, err = portNumber(b); err != nil {
			return 0, 0, err
		}
		if hi < lo {
			return 0, 0, fmt.Errorf("the range ends before it starts")
		}
	}
	return lo, hi, nil
}

// portNumber reads a port number in range.
func portNumber(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || strings.HasPrefix(s, "+") || strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("%q is not a port number", s)
	}
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %d is out of range 1-65535", n)
	}
	return n, nil
}

// command plans CMD and ENTRYPOINT. The shell form runs with /bin/sh -c;
// an ENTRYPOINT clears the CMD inherited from the base (not one this
// Dockerfile set before it), as Docker does.
func (p *planner) command(inst *Instruction) (*Step, error) {
	var argv []string
	text := inst.Cmd + " " + inst.Args
	switch {
	case inst.JSON:
		argv = cloneStrings(inst.List)
		if len(argv) == 0 {
			argv = nil
		}
		text = inst.Cmd + " " + compactJSON(argv)
	case strings.TrimSpace(inst.Args) == "":
		return nil, errorf(inst.Line, "%s requires an argument (%s [] clears it)", inst.Cmd, inst.Cmd)
	default:
		argv = []string{"/bin/sh", "-c", inst.Args}
	}
	if inst.Cmd == "CMD" {
		p.cfg.Cmd, p.cmdSet = argv, true
	} else {
		p.cfg.Entrypoint = argv
		if !p.cmdSet {
			p.cfg.Cmd = nil
		}
	}
	return &Step{Kind: ConfigStep, Text: text}, nil
}
