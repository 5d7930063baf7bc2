package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cairn-sandbox/cairn/api"
)

// FuzzHumanOutput puts arbitrary strings where a sandbox puts them: table
// cells, printf arguments, the JSON output. The human output never holds
// a byte a terminal could obey (only newlines end the table's rows), the
// escaped text keeps every printable character of the original, a table
// has exactly one line per row, and --json gives back exactly the text
// (valid UTF-8 strings; JSON carries text, not bytes).
func FuzzHumanOutput(f *testing.F) {
	f.Add("fresh install", "web")
	f.Add("\x1b[2K\r\x1b[31mFORGED", "\x1b]52;c;aGk=\a")
	f.Add("\u009b31m\x7f\u202eexe.txt", "a\tb\nc")
	f.Add("\xff\xfe\xc3", "\u2028\u2066")
	f.Add(`back\slash "quoted"`, "\ufffd real")
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, keep := range []bool{false, true} {
			e := escapeText(a, keep)
			if i := terminalHazard(e, keep); i >= 0 {
				t.Fatalf("escapeText(%q, %v) = %q holds a hazard at %d", a, keep, e, i)
			}
			if !keep && strings.ContainsAny(e, "\n\t") {
				t.Fatalf("escapeText(%q) = %q keeps a newline or tab", a, e)
			}
			if escapeText(e, keep) != e {
				t.Fatalf("escaped text %q changes when escaped again", e)
			}
			// Every rune left unescaped appears in order: nothing is lost.
			var kept strings.Builder
			for i, r := range a {
				if n := utf8.RuneLen(r); !mustEscape(r, runeLen(a, i), keep) && n > 0 {
					kept.WriteRune(r)
				}
			}
			if !isSubsequence(kept.String(), e) {
				t.Fatalf("escapeText(%q) = %q lost text", a, e)
			}
		}
		if q := quoteText(a); needsQuote(a) && (!strings.HasPrefix(q, `"`) || terminalHazard(q, false) >= 0) {
			t.Fatalf("quoteText(%q) = %q", a, q)
		}

		var buf bytes.Buffer
		tb := newTable(&buf, "A", "B")
		tb.Row(a, b)
		tb.Row(b, a)
		if err := tb.Flush(); err != nil {
			t.Fatal(err)
		}
		if i := terminalHazard(buf.String(), false); i >= 0 {
			t.Fatalf("table holds a hazard at %d: %q", i, buf.String())
		}
		if n := strings.Count(buf.String(), "\n"); n != 3 {
			t.Fatalf("table of 3 rows has %d lines: %q", n, buf.String())
		}

		var out, errb bytes.Buffer
		g := newGlobalOptions(strings.NewReader(""), &out, &errb)
		g.printf("Checkpoint %s of %s deleted\n", a, b)
		g.eprintf("warning: %s\n", a)
		if i := terminalHazard(out.String()+errb.String(), false); i >= 0 {
			t.Fatalf("printf holds a hazard at %d: %q", i, out.String()+errb.String())
		}

		out.Reset()
		ck := api.Checkpoint{ID: "v0", Comment: a, Label: b, Name: a + b}
		if err := g.printJSON(ck); err != nil {
			t.Fatal(err)
		}
		if i := terminalHazard(out.String(), false); i >= 0 {
			t.Fatalf("JSON holds a hazard at %d: %q", i, out.String())
		}
		var back api.Checkpoint
		if err := json.Unmarshal(out.Bytes(), &back); err != nil {
			t.Fatalf("JSON output does not decode: %v", err)
		}
		if utf8.ValidString(a) && utf8.ValidString(b) && (back.Comment != a || back.Label != b || back.Name != a+b) {
			t.Fatalf("JSON changed the text: %q %q, want %q %q", back.Comment, back.Label, a, b)
		}
	})
}

// runeLen is the length in bytes of the rune at s[i:], invalid bytes 1.
func runeLen(s string, i int) int {
	_, n := utf8.DecodeRuneInString(s[i:])
	return n
}

// isSubsequence reports whether the runes of sub appear in s in order.
func isSubsequence(sub, s string) bool {
	for _, r := range sub {
		i := strings.IndexRune(s, r)
		if i < 0 {
			return false
		}
		s = s[i+utf8.RuneLen(r):]
	}
	return true
}
