package dockerfile

import "testing"

func TestExpandWord(t *testing.T) {
	vars := map[string]string{"A": "a", "B": "b", "EMPTY": "", "SP": "x y", "V": "v1.2.3", "P": "/usr/local/bin"}
	lookup := func(name string) (string, bool) { v, ok := vars[name]; return v, ok }
	tests := []struct {
		in, want string
		escape   rune // 0 is '\\'
	}{
		{in: "plain", want: "plain"},
		{in: "$A", want: "a"},
		{in: "${A}", want: "a"},
		{in: "$A$B", want: "ab"},
		{in: "x${A}y", want: "xay"},
		{in: "$Ax", want: ""}, // the name is Ax
		{in: "$A-x", want: "a-x"},
		{in: "$UNSET", want: ""},
		{in: "$SP", want: "x y"},
		{in: "$", want: "$"},
		{in: "a$", want: "a$"},
		{in: "$-x", want: "$-x"},
		{in: "$1x", want: "x"},
		{in: "${UNSET:-d}", want: "d"},
		{in: "${EMPTY:-d}", want: "d"},
		{in: "${A:-d}", want: "a"},
		{in: "${UNSET-d}", want: "d"},
		{in: "${EMPTY-d}", want: ""},
		{in: "${A:+w}", want: "w"},
		{in: "${EMPTY:+w}", want: ""},
		{in: "${UNSET:+w}", want: ""},
		{in: "${EMPTY+w}", want: "w"},
		{in: "${UNSET+w}", want: ""},
		{in: "${A:?must}", want: "a"},
		{in: "${EMPTY?must}", want: ""},
		{in: "${UNSET:-$A}", want: "a"},
		{in: "${UNSET:-${B:-x}}", want: "b"},
		{in: "${UNSET:-a b}", want: "a b"},
		{in: `${UNSET:-"}"}`, want: "}"},
		{in: `${UNSET:-x\}y}`, want: "x}y"},
		{in: "${V#v}", want: "1.2.3"},
		{in: "${V#x}", want: "v1.2.3"},
		{in: "${V%.*}", want: "v1.2"},
		{in: "${V%%.*}", want: "v1"},
		{in: "${P#*/}", want: "usr/local/bin"},
		{in: "${P##*/}", want: "bin"},
		{in: "${P%/*}", want: "/usr/local"},
		{in: "${P%%/*}", want: ""},
		{in: "${P#/usr?}", want: "local/bin"},
		{in: `\$A`, want: "$A"},
		{in: `\\$A`, want: `\a`},
		{in: `a\ b`, want: "a b"},
		{in: `a\`, want: "a"},
		{in: `'$A'`, want: "$A"},
		{in: `'a\b'`, want: `a\b`},
		{in: `"$A"`, want: "a"},
		{in: `"a b"c`, want: "a bc"},
		{in: `"\$A"`, want: "$A"},
		{in: `"\"q\""`, want: `"q"`},
		{in: `"\x"`, want: `\x`},
		{in: `"\\"`, want: `\`},
		{in: `"'$A'"`, want: "'a'"},
		{in: `'"$A"'`, want: `"$A"`},
		{in: "`$A", want: "$A", escape: '`'},
		{in: `\$A`, want: `\a`, escape: '`'},
		{in: "\"`\"\"", want: `"`, escape: '`'},
	}
	for _, tt := range tests {
		esc := tt.escape
		if esc == 0 {
			esc = '\\'
		}
		got, err := expandWord(tt.in, esc, lookup)
		if err != nil || got != tt.want {
			t.Errorf("expandWord(%q, %q) = %q, %v; want %q", tt.in, esc, got, err, tt.want)
		}
	}
}

func TestExpandWordErrors(t *testing.T) {
	vars := map[string]string{"A": "a", "EMPTY": ""}
	lookup := func(name string) (string, bool) { v, ok := vars[name]; return v, ok }
	tests := []struct{ in, want string }{
		{"${A", "syntax error: missing '}'"},
		{"${", "syntax error: missing '}'"},
		{"${A:", "syntax error: missing '}'"},
		{"${A:-x", "syntax error: missing '}'"},
		{"x${UNSET:-${A}", "syntax error: missing '}'"},
		{"${}", "syntax error: bad substitution"},
		{"${:-x}", "syntax error: bad substitution"},
		{"${A:x}", "unsupported modifier (x) in ${A...}"},
		{"${A/a/b}", "unsupported modifier (/) in ${A...}"},
		{"${A:#a}", "unsupported modifier (:#) in ${A...}"},
		{"'abc", "unexpected end of text looking for the closing single quote"},
		{`"abc`, "unexpected end of text looking for the closing double quote"},
		{`"abc\"`, "unexpected end of text looking for the closing double quote"},
		{"${UNSET?}", "UNSET: is not allowed to be unset"},
		{"${UNSET:?}", "UNSET: is not allowed to be unset"},
		{"${EMPTY:?}", "EMPTY: is not allowed to be empty"},
		{"${EMPTY:?set it}", "EMPTY: set it"},
	}
	for _, tt := range tests {
		got, err := expandWord(tt.in, '\\', lookup)
		if err == nil || err.Error() != tt.want {
			t.Errorf("expandWord(%q) = %q, %v; want error %q", tt.in, got, err, tt.want)
		}
	}
}

func TestGlobMatch(t *testing.T) {
	tests := []struct {
		pat, s string
		want   bool
	}{
		{"", "", true},
		{"*", "", true},
		{"*", "a/b", true},
		{"a*c", "abbc", true},
		{"a*c", "abcd", false},
		{"?", "é", true},
		{"a?c", "ac", false},
		{"*.go", "x.go", true},
		{"**", "x", true},
		{"*a*b", "xaxbxb", true},
	}
	for _, tt := range tests {
		if got := globMatch(tt.pat, tt.s); got != tt.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tt.pat, tt.s, got, tt.want)
		}
	}
}
