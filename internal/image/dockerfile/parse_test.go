package dockerfile

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// summary shows a parsed Dockerfile one instruction a line:
// "LINE CMD [--flag=v ...] args" with "json" before a JSON list.
func summary(df *Dockerfile) []string {
	var out []string
	for _, inst := range df.Instructions {
		s := fmt.Sprintf("%d %s", inst.Line, inst.Cmd)
		for _, f := range inst.Flags {
			s += " --" + f.Name
			if f.HasValue {
				s += "=" + f.Value
			}
		}
		if inst.JSON {
			s += fmt.Sprintf(" json%q", inst.List)
		} else {
			s += " " + inst.Args
		}
		out = append(out, s)
	}
	return out
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"case-insensitive words", "from busybox\nRun echo hi\ncmd [\"a\"]", []string{"1 FROM busybox", "2 RUN echo hi", `3 CMD json["a"]`}},
		{"comments and blank lines", "# a comment\n\n  # indented comment\nFROM a\n\nRUN echo # not a comment\n", []string{"4 FROM a", "6 RUN echo # not a comment"}},
		{"continuation", "FROM a\nRUN echo a \\\n    && echo b\nRUN c", []string{"1 FROM a", "2 RUN echo a     && echo b", "4 RUN c"}},
		{"continuation with spaces after the escape", "FROM a\nRUN a \\  \t\nb", []string{"1 FROM a", "2 RUN a b"}},
		{"comment and empty lines inside a continuation", "FROM a\nRUN a \\\n# comment\n  # indented\n\n  b \\\nc\nRUN d", []string{"1 FROM a", "2 RUN a   b c", "8 RUN d"}},
		{"continuation at the end of the file", "FROM a\nRUN a \\", []string{"1 FROM a", "2 RUN a"}},
		{"a lone escape line", "FROM a\n\\\nRUN b", []string{"1 FROM a", "2 RUN b"}},
		{"escape directive", "# escape=`\nFROM a\nRUN dir c:\\\nRUN echo `\n  b", []string{"2 FROM a", `3 RUN dir c:\`, "4 RUN echo   b"}},
		{"escape directive with spaces, syntax ignored", "# syntax=docker/dockerfile:1\n  #  ESCAPE = ` \nFROM a\nRUN a `\nb", []string{"3 FROM a", "4 RUN a b"}},
		{"backslash escape directive", "# escape=\\\nFROM a\nRUN a \\\nb", []string{"2 FROM a", "3 RUN a b"}},
		{"unknown directive ends directives", "# foo=bar\n# escape=`\nFROM a\nRUN a \\\nb", []string{"3 FROM a", "4 RUN a b"}},
		{"CRLF and BOM", "\ufeffFROM a\r\nRUN a \\\r\nb\r\n", []string{"1 FROM a", "2 RUN a b"}},
		{"exec form", "FROM a\nRUN [ \"echo\" , \"a b\" ]\nENTRYPOINT []", []string{"1 FROM a", `2 RUN json["echo" "a b"]`, `3 ENTRYPOINT json[]`}},
		{"bad JSON is shell form", "FROM a\nCMD [a, b]\nRUN [\"a\" \"b\"]\nCMD [\"a\"] x", []string{"1 FROM a", "2 CMD [a, b]", `3 RUN ["a" "b"]`, `4 CMD ["a"] x`}},
		{"JSON only where Docker reads it", "FROM a\nENV A=[\"x\"]\nWORKDIR [\"/x\"]", []string{"1 FROM a", `2 ENV A=["x"]`, `3 WORKDIR ["/x"]`}},
		{"flags", "FROM --platform=linux/x a\nCOPY --chown=1:1 --chmod=755 --link a b\nADD --link=false a b", []string{"1 FROM --platform=linux/x a", "2 COPY --chown=1:1 --chmod=755 --link a b", "3 ADD --link=false a b"}},
		{"quoted flag value", "FROM a\nCOPY --chown=\"a b\" x y", []string{"1 FROM a", `2 COPY --chown="a b" x y`}},
		{"-- ends the flags", "FROM a\nCOPY -- --x y", []string{"1 FROM a", "2 COPY --x y"}},
		{"COPY JSON form with flags", "FROM a\nCOPY --chown=1 [\"a\", \"b\"]", []string{"1 FROM a", `2 COPY --chown=1 json["a" "b"]`}},
		{"ARGs before FROM", "ARG A=1\narg B\nFROM a:$A", []string{"1 ARG A=1", "2 ARG B", "3 FROM a:$A"}},
		{"MAINTAINER and LABEL", "FROM a\nMAINTAINER me <me@x>\nLABEL a=b \"c d\"=e", []string{"1 FROM a", "2 MAINTAINER me <me@x>", `3 LABEL a=b "c d"=e`}},
		{"here-string is not a heredoc", "FROM a\nRUN cat <<< hi && x << y", []string{"1 FROM a", "2 RUN cat <<< hi && x << y"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			df, err := Parse(strings.NewReader(tt.src))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := summary(df); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestParseEscapeRecorded(t *testing.T) {
	df, err := Parse(strings.NewReader("# escape=`\nFROM a"))
	if err != nil {
		t.Fatal(err)
	}
	if df.Escape != '`' {
		t.Errorf("Escape = %q, want `", df.Escape)
	}
	df, err = Parse(strings.NewReader("FROM a"))
	if err != nil {
		t.Fatal(err)
	}
	if df.Escape != '\\' {
		t.Errorf("Escape = %q, want \\", df.Escape)
	}
}

func TestParseErrors(t *testing.T) {
	const list = "(supported: FROM, RUN, COPY, ADD, ENV, ARG, WORKDIR, USER, EXPOSE, CMD, ENTRYPOINT, LABEL)"
	tests := []struct {
		name string
		src  string
		line int
		want string // the whole Error()
	}{
		{"empty", "", 0, "Dockerfile: the Dockerfile is empty (it needs a FROM)"},
		{"only comments", "# x\n\n# y\n", 0, "Dockerfile: the Dockerfile is empty (it needs a FROM)"},
		{"no FROM", "ARG A=1\n", 0, "Dockerfile: no FROM instruction"},
		{"instruction before FROM", "ARG A\nRUN x\nFROM a", 2, "Dockerfile:2: RUN before FROM: only ARG may come before FROM"},
		{"HEALTHCHECK", "FROM a\nRUN a\nRUN b\n\nRUN c \\\n d\nHEALTHCHECK CMD true", 7, "Dockerfile:7: HEALTHCHECK is not supported by cairn image build " + list},
		{"ONBUILD", "FROM a\nonbuild RUN x", 2, "Dockerfile:2: ONBUILD is not supported by cairn image build " + list},
		{"SHELL", "FROM a\nSHELL [\"bash\"]", 2, "Dockerfile:2: SHELL is not supported by cairn image build " + list},
		{"STOPSIGNAL", "FROM a\nSTOPSIGNAL 9", 2, "Dockerfile:2: STOPSIGNAL is not supported by cairn image build " + list},
		{"VOLUME", "FROM a\nVOLUME /x", 2, "Dockerfile:2: VOLUME is not supported by cairn image build " + list},
		{"unknown word", "FROM a\nRUNN x", 2, `Dockerfile:2: unknown instruction "RUNN" is not supported by cairn image build ` + list},
		{"a directive that came too late", "# hi\n# escape=`\nFROM a\nRUN a `\nb", 5, `Dockerfile:5: unknown instruction "b" is not supported by cairn image build ` + list},
		{"second FROM", "FROM a AS x\nRUN y\nFROM b", 3, "Dockerfile:3: a second FROM (a multi-stage build; the first is at line 1) is not supported by cairn image build"},
		{"COPY --from", "FROM a\nCOPY --from=build /x /y", 2, "Dockerfile:2: COPY --from is not supported by cairn image build (it copies from another stage or image: multi-stage builds are not supported)"},
		{"RUN --mount", "FROM a\nRUN --mount=type=cache,target=/x make", 2, "Dockerfile:2: RUN --mount is not supported by cairn image build"},
		{"ADD --checksum", "FROM a\nADD --checksum=sha256:00 a b", 2, "Dockerfile:2: ADD --checksum is not supported by cairn image build"},
		{"unknown flag", "FROM a\nCOPY --own=1 a b", 2, "Dockerfile:2: unknown flag --own for COPY (it takes --chown, --chmod, --link)"},
		{"flag on an instruction with none", "FROM a\nENV --x=1 A=b", 2, "Dockerfile:2: unknown flag --x for ENV (it takes none)"},
		{"flag without value", "FROM a\nCOPY --chown a b", 2, "Dockerfile:2: COPY: --chown needs a value (--chown=...)"},
		{"flag twice", "FROM a\nCOPY --chown=1 --chown=2 a b", 2, "Dockerfile:2: COPY: --chown given twice"},
		{"bad bool flag", "FROM a\nCOPY --link=yes a b", 2, `Dockerfile:2: COPY: --link is true or false, not "yes"`},
		{"heredoc RUN", "FROM a\nRUN <<EOF\necho\nEOF", 2, "Dockerfile:2: RUN with a heredoc (<<EOF) is not supported by cairn image build"},
		{"heredoc COPY", "FROM a\nCOPY <<-'EOT' /x", 2, "Dockerfile:2: COPY with a heredoc (<<-'EOT') is not supported by cairn image build"},
		{"JSON of non-strings", "FROM a\nRUN [\"a\", 1]", 2, "Dockerfile:2: RUN: a JSON array must hold only strings"},
		{"RUN []", "FROM a\nRUN []", 2, "Dockerfile:2: RUN [] has no command"},
		{"RUN without command", "FROM a\nRUN   ", 2, "Dockerfile:2: RUN requires at least one argument"},
		{"RUN with only a continuation", "FROM a\nRUN \\\n", 2, "Dockerfile:2: RUN requires at least one argument"},
		{"COPY one word", "FROM a\nCOPY a", 2, "Dockerfile:2: COPY requires at least one source and a destination"},
		{"COPY JSON one word", "FROM a\nCOPY [\"a\"]", 2, "Dockerfile:2: COPY requires at least one source and a destination"},
		{"ENV without value", "FROM a\nENV A", 2, "Dockerfile:2: ENV A needs a value (ENV KEY=value, or ENV KEY value)"},
		{"ENV pair without =", "FROM a\nENV A=1 B", 2, `Dockerfile:2: ENV: no = in "B": the form is KEY=value`},
		{"ARG without name", "FROM a\nARG =1", 2, `Dockerfile:2: ARG "=1" has no name`},
		{"two escape directives", "# escape=`\n# escape=\\\nFROM a", 2, "Dockerfile:2: only one escape parser directive can be used"},
		{"bad escape", "# escape=x\nFROM a", 1, `Dockerfile:1: invalid escape character "x": it must be ` + "`" + ` or \`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.src))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse: %v, want an *Error", err)
			}
			if e.Line != tt.line || err.Error() != tt.want {
				t.Errorf("got line %d %q\nwant line %d %q", e.Line, err.Error(), tt.line, tt.want)
			}
		})
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("boom") }

func TestParseReadError(t *testing.T) {
	_, err := Parse(failingReader{})
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Parse: %v, want the read error", err)
	}
}

func TestSplitRaw(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  a  b\tc ", []string{"a", "b", "c"}},
		{`A="x y" B='p q' C=z`, []string{`A="x y"`, `B='p q'`, "C=z"}},
		{`a\ b c`, []string{`a\ b`, "c"}},
		{`"a \" b" c`, []string{`"a \" b"`, "c"}},
		{`'a \' b`, []string{`'a \'`, "b"}},
		{`"unterminated x`, []string{`"unterminated x`}},
	}
	for _, tt := range tests {
		if got := splitRaw(tt.in, '\\'); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("splitRaw(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
