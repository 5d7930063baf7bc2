package dockerfile

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// lookupFunc gives a variable's value and whether it is set.
type lookupFunc func(name string) (string, bool)

// expandWord expands one word as Docker's shell-word lexer does for the
// instructions it expands (FROM, COPY, ADD, ENV, ARG, EXPOSE, LABEL, USER,
// WORKDIR): text in single quotes is literal; in double quotes variables
// are expanded and the escape character escapes only '"', '$' and itself;
// elsewhere the escape character makes the next character literal (and is
// dropped at the end); the quotes themselves are removed. Whitespace is
// kept: nothing is split into words.
//
// Variables: $NAME and ${NAME} (unset is ""), ${NAME:-word} (word if NAME
// is unset or empty), ${NAME-word} (if unset), ${NAME:+word} (word if NAME
// is set and not empty, else ""), ${NAME+word} (if set), ${NAME:?msg} and
// ${NAME?msg} (an error if empty or unset / unset), ${NAME#pat},
// ${NAME##pat}, ${NAME%pat}, ${NAME%%pat} (remove the shortest / longest
// prefix / suffix matching a pattern of '*', '?' and literal characters).
// The word in ${NAME:-word} is itself expanded. A '$' not followed by a
// name, a digit or '{' is a literal '$'.
func expandWord(s string, escape rune, lookup lookupFunc) (string, error) {
	l := &lexer{src: []rune(s), escape: escape, lookup: lookup}
	return l.until(0)
}

// lexer is the state of one expandWord.
type lexer struct {
	src    []rune
	pos    int
	escape rune
	lookup lookupFunc
}

// errMissingBrace is the error for a "${" without its "}".
var errMissingBrace = errors.New("syntax error: missing '}'")

// until expands up to the rune stop, outside quotes and not escaped, and
// past it; stop 0 means the end of the input.
func (l *lexer) until(stop rune) (string, error) {
	var b strings.Builder
	for l.pos < len(l.src) {
		r := l.src[l.pos]
		if stop != 0 && r == stop {
			l.pos++
			return b.String(), nil
		}
		var s string
		var err error
		switch r {
		case '\'':
			s, err = l.single()
		case '"':
			s, err = l.double()
		case '$':
			s, err = l.dollar()
		default:
			l.pos++
			if r == l.escape {
				if l.pos == len(l.src) {
					continue
				}
				r = l.src[l.pos]
				l.pos++
			}
			s = string(r)
		}
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
	if stop != 0 {
		return "", errMissingBrace
	}
	return b.String(), nil
}

// single reads '...' literally.
func (l *lexer) single() (string, error) {
	l.pos++
	start := l.pos
	for l.pos < len(l.src) {
		if l.src[l.pos] == '\'' {
			l.pos++
			return string(l.src[start : l.pos-1]), nil
		}
		l.pos++
	}
	return "", errors.New("unexpected end of text looking for the closing single quote")
}

// double reads "...", expanding variables.
func (l *lexer) double() (string, error) {
	l.pos++
	var b strings.Builder
	for l.pos < len(l.src) {
		r := l.src[l.pos]
		switch {
		case r == '"':
			l.pos++
			return b.String(), nil
		case r == '$':
			s, err := l.dollar()
			if err != nil {
				return "", err
			}
			b.WriteString(s)
			continue
		case r == l.escape && l.pos+1 < len(l.src):
			if n := l.src[l.pos+1]; n == '"' || n == '$' || n == l.escape {
				l.pos++
				r = n
			}
		}
		b.WriteRune(r)
		l.pos++
	}
	return "", errors.New("unexpected end of text looking for the closing double quote")
}

// name reads a variable name: letters, digits and '_' not starting with a
// digit, or only digits (a positional parameter, which is never set).
func (l *lexer) name() string {
	start := l.pos
	if l.pos < len(l.src) && unicode.IsDigit(l.src[l.pos]) {
		for l.pos < len(l.src) && unicode.IsDigit(l.src[l.pos]) {
			l.pos++
		}
		return string(l.src[start:l.pos])
	}
	for l.pos < len(l.src) {
		r := l.src[l.pos]
		if r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			break
		}
		l.pos++
	}
	return string(l.src[start:l.pos])
}

// dollar expands the variable at a '$'.
func (l *lexer) dollar() (string, error) {
	l.pos++
	if l.pos == len(l.src) || l.src[l.pos] != '{' {
		name := l.name()
		if name == "" {
			return "$", nil
		}
		v, _ := l.lookup(name)
		return v, nil
	}
	l.pos++
	name := l.name()
	if l.pos == len(l.src) {
		return "", errMissingBrace
	}
	if name == "" {
		return "", errors.New("syntax error: bad substitution")
	}
	value, set := l.lookup(name)
	op := l.src[l.pos]
	l.pos++
	if op == '}' {
		return value, nil
	}
	colon := op == ':'
	if colon {
		if l.pos == len(l.src) {
			return "", errMissingBrace
		}
		op = l.src[l.pos]
		l.pos++
	}
	doubled := false
	if !colon && (op == '#' || op == '%') && l.pos < len(l.src) && l.src[l.pos] == op {
		doubled = true
		l.pos++
	}
	switch op {
	case '-', '+', '?', '#', '%':
	default:
		return "", fmt.Errorf("unsupported modifier (%c) in ${%s...}", op, name)
	}
	if colon && (op == '#' || op == '%') {
		return "", fmt.Errorf("unsupported modifier (:%c) in ${%s...}", op, name)
	}
	word, err := l.until('}')
	if err != nil {
		return "", err
	}
	// With a colon, an empty value counts as unset.
	present := set && (!colon || value != "")
	switch op {
	case '-':
		if !present {
			return word, nil
		}
		return value, nil
	case '+':
		if present {
			return word, nil
		}
		return "", nil
	case '?':
		if present {
			return value, nil
		}
		if word == "" {
			word = "is not allowed to be unset"
			if set {
				word = "is not allowed to be empty"
			}
		}
		return "", fmt.Errorf("%s: %s", name, word)
	case '#':
		return trimPrefixGlob(value, word, doubled), nil
	default: // '%'
		return trimSuffixGlob(value, word, doubled), nil
	}
}

// trimPrefixGlob removes from s its shortest (or longest) prefix that
// matches the pattern pat.
func trimPrefixGlob(s, pat string, longest bool) string {
	r := []rune(s)
	if longest {
		for i := len(r); i >= 0; i-- {
			if globMatch(pat, string(r[:i])) {
				return string(r[i:])
			}
		}
		return s
	}
	for i := 0; i <= len(r); i++ {
		if globMatch(pat, string(r[:i])) {
			return string(r[i:])
		}
	}
	return s
}

// trimSuffixGlob removes from s its shortest (or longest) suffix that
// matches the pattern pat.
func trimSuffixGlob(s, pat string, longest bool) string {
	r := []rune(s)
	if longest {
		for i := 0; i <= len(r); i++ {
			if globMatch(pat, string(r[i:])) {
				return string(r[:i])
			}
		}
		return s
	}
	for i := len(r); i >= 0; i-- {
		if globMatch(pat, string(r[i:])) {
			return string(r[:i])
		}
	}
	return s
}

// globMatch reports whether s matches pat, where '*' matches any run of
// characters (slashes too), '?' any one character, and every other
// character itself.
func globMatch(pat, s string) bool {
	p, t := []rune(pat), []rune(s)
	// Iterative matching with backtracking to the last '*'.
	pi, ti, star, mark := 0, 0, -1, 0
	for ti < len(t) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == t[ti]) && p[pi] != '*':
			pi++
			ti++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ti
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			ti = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
