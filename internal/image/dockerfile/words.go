package dockerfile

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// rawWord reads the word at the start of s (which must not start with
// whitespace) up to unquoted, unescaped whitespace, and returns it as
// written (quotes and escape characters kept, for expandWord) with what
// follows it.
func rawWord(s string, escape rune) (word, rest string) {
	var quote rune
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case quote == 0 && unicode.IsSpace(r):
			return s[:i], s[i:]
		case quote == 0 && (r == '\'' || r == '"'):
			quote = r
		case quote != 0 && r == quote:
			quote = 0
		case r == escape && quote != '\'' && i+size < len(s):
			_, next := utf8.DecodeRuneInString(s[i+size:])
			size += next
		}
		i += size
	}
	return s, ""
}

// splitRaw splits s into words as rawWord reads them.
func splitRaw(s string, escape rune) []string {
	var words []string
	for {
		s = trimLeftSpace(s)
		if s == "" {
			return words
		}
		var w string
		w, s = rawWord(s, escape)
		words = append(words, w)
	}
}

// keyValue is one key=value pair of ENV, LABEL or ARG, as written.
type keyValue struct {
	Key, Value string
	HasValue   bool // an ARG without "=" has none
}

// legacySplit splits "KEY value with spaces" at its first whitespace.
var legacySplit = regexp.MustCompile(`[\t\v\f\r ]+`)

// keyValues reads the pairs of ENV and LABEL ("K=v K2=v2", or the legacy
// "K value with spaces") or of ARG ("NAME", "NAME=default", several).
func keyValues(inst *Instruction, escape rune) ([]keyValue, error) {
	words := splitRaw(inst.Args, escape)
	if len(words) == 0 {
		return nil, errorf(inst.Line, "%s requires at least one argument", inst.Cmd)
	}
	var kvs []keyValue
	if inst.Cmd == "ARG" {
		for _, w := range words {
			k, v, has := strings.Cut(w, "=")
			if k == "" {
				return nil, errorf(inst.Line, "ARG %q has no name", w)
			}
			kvs = append(kvs, keyValue{Key: k, Value: v, HasValue: has})
		}
		return kvs, nil
	}
	if !strings.Contains(words[0], "=") {
		parts := legacySplit.Split(inst.Args, 2)
		if len(parts) < 2 || parts[1] == "" {
			return nil, errorf(inst.Line, "%s %s needs a value (%s KEY=value, or %s KEY value)", inst.Cmd, inst.Args, inst.Cmd, inst.Cmd)
		}
		return []keyValue{{Key: parts[0], Value: parts[1], HasValue: true}}, nil
	}
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			return nil, errorf(inst.Line, "%s: no = in %q: the form is KEY=value", inst.Cmd, w)
		}
		if k == "" {
			return nil, errorf(inst.Line, "%s: %q has no key", inst.Cmd, w)
		}
		kvs = append(kvs, keyValue{Key: k, Value: v, HasValue: true})
	}
	return kvs, nil
}
