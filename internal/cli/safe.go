package cli

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Safe output. Strings the CLI shows come from cairnd, and many of them
// from inside a sandbox (comments, labels, snapshot names, service names,
// commands and errors, file names, logs), where untrusted code chose them.
// A terminal obeys escape sequences in what it prints: a comment holding
// "\x1b[2K\r" erases its line and forges another, OSC 52 sets the
// clipboard. So every human printer passes such strings through
// escapeText, and --json output through safeJSON; docs/security.md
// says what is escaped and why.

// escapeText returns s with every byte or character that a terminal could
// take as a command written as a visible escape:
//
//   - C0 controls (U+0000-U+001F) as \t, \n, \r or \xNN, except \n and \t
//     when keepLayout is set (multi-line text such as a log);
//   - DEL as \x7f;
//   - C1 controls (U+0080-U+009F, which some terminals obey as 8-bit
//     CSI, OSC…) as \u0080-\u009f;
//   - bidirectional overrides, embeddings, isolates and marks (U+061C,
//     U+200E, U+200F, U+202A-U+202E, U+2066-U+2069) and the line and
//     paragraph separators U+2028, U+2029, which reorder or break what
//     follows them on the screen, as \uNNNN;
//   - each byte that is not part of valid UTF-8 as \xNN.
//
// Everything else, backslashes included, is left as it is: the escapes
// are for the eye, and --json carries the exact text.
func escapeText(s string, keepLayout bool) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if mustEscape(r, n, keepLayout) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s // the common case: nothing to escape, no copy
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !mustEscape(r, n, keepLayout) {
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += n
	}
	return b.String()
}

// mustEscape says whether the rune r, n bytes long in its string, is one
// escapeText escapes.
func mustEscape(r rune, n int, keepLayout bool) bool {
	switch {
	case r == utf8.RuneError && n <= 1:
		return true // invalid UTF-8 (a real U+FFFD is 3 bytes long)
	case r == '\n' || r == '\t':
		return !keepLayout
	case r < 0x20 || r == 0x7f:
		return true
	case r < 0x80:
		return false
	}
	return isC1OrBidi(r)
}

// isC1OrBidi reports the non-ASCII runes escapeText escapes.
func isC1OrBidi(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f:
		return true
	case r >= 0x202a && r <= 0x202e:
		return true
	case r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

// safe escapes a one-line string for the terminal: table cells, names,
// messages.
func safe(s string) string { return escapeText(s, false) }

// safeArgs returns args with every string, error and fmt.Stringer turned
// into its escaped text, for printf-style printers.
func safeArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			out[i] = safe(v)
		case error:
			out[i] = safe(v.Error())
		case fmt.Stringer:
			out[i] = safe(v.String())
		default:
			out[i] = a
		}
	}
	return out
}

// quoteText renders s in double quotes, escaped as escapeText does, with
// quotes and backslashes escaped too so that the quoted form is
// unambiguous: for file names, which may hold anything.
func quoteText(s string) string {
	e := escapeText(strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s), false)
	return `"` + e + `"`
}

// needsQuote reports whether s would change when escaped, or could be
// mistaken for the quoted form.
func needsQuote(s string) bool {
	return escapeText(s, false) != s || strings.HasPrefix(s, `"`)
}

// safeJSON rewrites encoded JSON so that it holds no character a terminal
// could obey: encoding/json already writes C0 controls, U+2028 and U+2029
// as \u escapes, and this writes DEL, C1 controls and the bidirectional
// controls the same way. Such characters can only be inside JSON strings,
// and \uNNNN decodes to the very same character, so the document means
// exactly what it meant. (JSON holds text, not bytes: encoding/json has
// already replaced invalid UTF-8 with U+FFFD.)
func safeJSON(b []byte) []byte {
	i := 0
	for i < len(b) {
		r, n := utf8.DecodeRune(b[i:])
		if r == 0x7f || isC1OrBidi(r) {
			break
		}
		i += n
	}
	if i == len(b) {
		return b
	}
	var out bytes.Buffer
	out.Grow(len(b) + 16)
	out.Write(b[:i])
	for i < len(b) {
		r, n := utf8.DecodeRune(b[i:])
		if r == 0x7f || isC1OrBidi(r) {
			fmt.Fprintf(&out, `\u%04x`, r)
		} else {
			out.Write(b[i : i+n])
		}
		i += n
	}
	return out.Bytes()
}
