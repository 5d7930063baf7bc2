package dockerfile

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"unicode"
)

// Dockerfile is a parsed Dockerfile: what Parse read, checked for syntax
// and for what cairn builds, its variables not yet expanded.
type Dockerfile struct {
	Escape       rune          // the escape character: '\\', or '`' after "# escape=`"
	Instructions []Instruction // in order; exactly one is FROM, and only ARGs come before it
}

// Instruction is one instruction as written, its continuation lines
// joined (without the escape characters that continued them and without
// the comment lines inside them).
type Instruction struct {
	Line int    // the line it starts on, 1-based
	Cmd  string // the instruction word in upper case: "RUN"
	// Flags are the --name[=value] words before the arguments, in order,
	// each known to be one Cmd takes.
	Flags []Flag
	// Args is the rest of the instruction after the flags, trimmed.
	Args string
	// JSON tells that Args is a JSON array of strings (the exec form of
	// RUN, CMD and ENTRYPOINT, the JSON form of COPY and ADD); List holds
	// its elements. Other instructions, and arguments that are not valid
	// JSON, are in shell form (as Docker does, text that starts with "["
	// but is not valid JSON is shell form).
	JSON bool
	List []string
}

// Flag is one flag of an instruction: "--chown=1:1" is {chown, "1:1", true}.
type Flag struct {
	Name     string // without the dashes
	Value    string // as written (quotes kept), expanded by Plan
	HasValue bool   // written with "="
}

// flagKind is what a flag of an instruction is to cairn.
type flagKind int

const (
	flagString  flagKind = iota // takes a value: --chown=1:1
	flagBool                    // takes none, or =true / =false: --link
	flagRefused                 // Docker's, but not supported by cairn
)

// flagRules lists the flags each instruction takes (the instructions not
// listed take none), with Docker's flags cairn refuses, so the error for
// those says "not supported" rather than "unknown".
var flagRules = map[string]map[string]flagKind{
	"FROM": {"platform": flagString},
	"COPY": {"chown": flagString, "chmod": flagString, "link": flagBool, "from": flagRefused, "parents": flagRefused, "exclude": flagRefused},
	"ADD":  {"chown": flagString, "chmod": flagString, "link": flagBool, "checksum": flagRefused, "keep-git-dir": flagRefused, "exclude": flagRefused, "unpack": flagRefused},
	"RUN":  {"mount": flagRefused, "network": flagRefused, "security": flagRefused, "device": flagRefused},
}

// instructions are the instruction words Parse accepts, and refused the
// ones Docker knows but cairn does not build.
var (
	instructions = map[string]bool{
		"FROM": true, "RUN": true, "COPY": true, "ADD": true, "ENV": true, "ARG": true, "WORKDIR": true,
		"USER": true, "EXPOSE": true, "CMD": true, "ENTRYPOINT": true, "LABEL": true, "MAINTAINER": true,
	}
	refused = map[string]bool{"ONBUILD": true, "HEALTHCHECK": true, "SHELL": true, "STOPSIGNAL": true, "VOLUME": true}
)

// jsonForms are the instructions whose arguments may be a JSON array.
var jsonForms = map[string]bool{"RUN": true, "CMD": true, "ENTRYPOINT": true, "COPY": true, "ADD": true}

// directiveRE matches a parser directive line, its leading whitespace
// trimmed: "# escape=`".
var directiveRE = regexp.MustCompile(`^#\s*([a-zA-Z][a-zA-Z0-9]*)\s*=\s*(.+?)\s*$`)

// Parse reads a Dockerfile. A syntax error, an instruction or flag cairn
// does not support, a file without FROM or with a second one is an
// *Error naming the line; a read error is returned wrapped.
func Parse(r io.Reader) (*Dockerfile, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read Dockerfile: %w", err)
	}
	lines := strings.Split(strings.TrimPrefix(string(data), "\ufeff"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	df := &Dockerfile{Escape: '\\'}
	n, err := parseDirectives(lines, df)
	if err != nil {
		return nil, err
	}
	for i := n; i < len(lines); i++ {
		first := trimLeftSpace(lines[i])
		if first == "" || first[0] == '#' {
			continue
		}
		start := i + 1
		body, more := trimContinuation(first, df.Escape)
		for more && i+1 < len(lines) {
			i++
			next := lines[i]
			if t := trimLeftSpace(next); t == "" || t[0] == '#' {
				continue // Docker skips comment and empty lines inside a continuation
			}
			var part string
			part, more = trimContinuation(next, df.Escape)
			body += part
		}
		if strings.TrimSpace(body) == "" {
			continue
		}
		inst, err := parseInstruction(start, body, df.Escape)
		if err != nil {
			return nil, err
		}
		df.Instructions = append(df.Instructions, inst)
	}
	if err := checkStage(df.Instructions); err != nil {
		return nil, err
	}
	return df, nil
}

// parseDirectives reads the parser directives at the top of lines into df
// and returns how many lines they took. As in Docker, the first line that
// is not a known directive (a comment, a blank line, an instruction, an
// unknown directive) ends them.
func parseDirectives(lines []string, df *Dockerfile) (int, error) {
	seen := map[string]bool{}
	for i, l := range lines {
		m := directiveRE.FindStringSubmatch(trimLeftSpace(l))
		if m == nil {
			return i, nil
		}
		name := strings.ToLower(m[1])
		switch name {
		case "escape", "syntax", "check":
		default:
			return i, nil
		}
		if seen[name] {
			return 0, errorf(i+1, "only one %s parser directive can be used", name)
		}
		seen[name] = true
		if name == "escape" {
			switch m[2] {
			case `\`:
				df.Escape = '\\'
			case "`":
				df.Escape = '`'
			default:
				return 0, errorf(i+1, "invalid escape character %q: it must be ` or \\", m[2])
			}
		}
	}
	return len(lines), nil
}

// trimLeftSpace trims leading whitespace.
func trimLeftSpace(s string) string { return strings.TrimLeftFunc(s, unicode.IsSpace) }

// trimContinuation reports whether line ends with the escape character
// (then followed only by spaces or tabs), and returns line without it.
func trimContinuation(line string, escape rune) (string, bool) {
	t := strings.TrimRight(line, " \t")
	if strings.HasSuffix(t, string(escape)) {
		return t[:len(t)-len(string(escape))], true
	}
	return line, false
}

// parseInstruction parses one instruction, its lines joined, that starts
// on line.
func parseInstruction(line int, body string, escape rune) (Instruction, error) {
	body = strings.TrimSpace(body)
	word, rest := body, ""
	if i := strings.IndexFunc(body, unicode.IsSpace); i >= 0 {
		word, rest = body[:i], trimLeftSpace(body[i:])
	}
	inst := Instruction{Line: line, Cmd: strings.ToUpper(word)}
	switch {
	case refused[inst.Cmd]:
		return inst, notSupported(line, inst.Cmd)
	case !instructions[inst.Cmd]:
		return inst, notSupported(line, fmt.Sprintf("unknown instruction %q", word))
	}
	rest, err := parseFlags(&inst, rest, escape)
	if err != nil {
		return inst, err
	}
	inst.Args = strings.TrimSpace(rest)
	if jsonForms[inst.Cmd] && strings.HasPrefix(inst.Args, "[") {
		var list []any
		if json.Unmarshal([]byte(inst.Args), &list) == nil {
			inst.JSON, inst.List = true, make([]string, len(list))
			for i, v := range list {
				s, ok := v.(string)
				if !ok {
					return inst, errorf(line, "%s: a JSON array must hold only strings", inst.Cmd)
				}
				inst.List[i] = s
			}
		}
	}
	return inst, checkArgs(&inst, escape)
}

// parseFlags reads the flags at the start of rest into inst, checks them
// against flagRules, and returns what follows them. A word "--" ends the
// flags, as in Docker.
func parseFlags(inst *Instruction, rest string, escape rune) (string, error) {
	rules := flagRules[inst.Cmd]
	seen := map[string]bool{}
	for {
		rest = trimLeftSpace(rest)
		if !strings.HasPrefix(rest, "--") {
			return rest, nil
		}
		var w string
		w, rest = rawWord(rest, escape)
		if w == "--" {
			return rest, nil
		}
		name, value, has := strings.Cut(w[2:], "=")
		kind, ok := rules[name]
		switch {
		case !ok:
			return "", errorf(inst.Line, "unknown flag --%s for %s%s", name, inst.Cmd, flagList(rules))
		case kind == flagRefused:
			hint := ""
			if name == "from" {
				hint = " (it copies from another stage or image: multi-stage builds are not supported)"
			}
			return "", errorf(inst.Line, "%s --%s is not supported by cairn image build%s", inst.Cmd, name, hint)
		case seen[name]:
			return "", errorf(inst.Line, "%s: --%s given twice", inst.Cmd, name)
		case kind == flagString && !has:
			return "", errorf(inst.Line, "%s: --%s needs a value (--%s=...)", inst.Cmd, name, name)
		case kind == flagBool && has && value != "true" && value != "false":
			return "", errorf(inst.Line, "%s: --%s is true or false, not %q", inst.Cmd, name, value)
		}
		seen[name] = true
		inst.Flags = append(inst.Flags, Flag{Name: name, Value: value, HasValue: has})
	}
}

// flagList says which flags an instruction takes, for an error message.
func flagList(rules map[string]flagKind) string {
	var names []string
	for _, name := range []string{"platform", "chown", "chmod", "link"} {
		if k, ok := rules[name]; ok && k != flagRefused {
			names = append(names, "--"+name)
		}
	}
	if len(names) == 0 {
		return " (it takes none)"
	}
	return " (it takes " + strings.Join(names, ", ") + ")"
}

// checkArgs checks what can be checked of an instruction's arguments
// before expansion: that there are some, that COPY and ADD have a source
// and a destination, and that there is no heredoc.
func checkArgs(inst *Instruction, escape rune) error {
	if inst.Args == "" {
		return errorf(inst.Line, "%s requires at least one argument", inst.Cmd)
	}
	if inst.JSON && len(inst.List) == 0 && inst.Cmd == "RUN" {
		return errorf(inst.Line, "RUN [] has no command")
	}
	if inst.JSON {
		if (inst.Cmd == "COPY" || inst.Cmd == "ADD") && len(inst.List) < 2 {
			return errorf(inst.Line, "%s requires at least one source and a destination", inst.Cmd)
		}
		return nil
	}
	switch inst.Cmd {
	case "ENV", "LABEL", "ARG":
		_, err := keyValues(inst, escape)
		return err
	case "RUN", "COPY", "ADD":
		words := splitRaw(inst.Args, escape)
		for _, w := range words {
			if isHeredoc(w) {
				return errorf(inst.Line, "%s with a heredoc (%s) is not supported by cairn image build", inst.Cmd, w)
			}
		}
		if inst.Cmd != "RUN" && len(words) < 2 {
			return errorf(inst.Line, "%s requires at least one source and a destination", inst.Cmd)
		}
	}
	return nil
}

// isHeredoc reports whether a word starts a heredoc as Docker sees one:
// "<<EOF", "<<-EOF", "<<'EOF'" (but not "<<<" nor a bare "<<").
func isHeredoc(w string) bool {
	rest, ok := strings.CutPrefix(w, "<<")
	if !ok {
		return false
	}
	rest = strings.TrimPrefix(rest, "-")
	return rest != "" && !strings.Contains(rest, "<")
}

// checkStage checks that the instructions are one build stage: some
// ARGs, one FROM, then the rest.
func checkStage(insts []Instruction) error {
	if len(insts) == 0 {
		return errorf(0, "the Dockerfile is empty (it needs a FROM)")
	}
	from := 0
	for _, inst := range insts {
		switch {
		case inst.Cmd == "FROM" && from != 0:
			return errorf(inst.Line, "a second FROM (a multi-stage build; the first is at line %d) is not supported by cairn image build", from)
		case inst.Cmd == "FROM":
			from = inst.Line
		case from == 0 && inst.Cmd != "ARG":
			return errorf(inst.Line, "%s before FROM: only ARG may come before FROM", inst.Cmd)
		}
	}
	if from == 0 {
		return errorf(0, "no FROM instruction")
	}
	return nil
}
