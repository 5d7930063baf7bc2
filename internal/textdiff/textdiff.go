// Package textdiff writes the difference of two texts as a unified diff
// (the lines of each hunk prefixed " ", "-" or "+", under "@@ -a,b +c,d
// @@" headers), the form `diff -u` and git print. The common head and
// tail of the two texts are set aside first; what lies between is
// compared line by line by a longest common subsequence, when it is small
// enough (maxCells): past that the change is too large to show and
// Unified says so. It is meant for the text files a user looks at (a
// config, a script), not for large data.
package textdiff

import (
	"fmt"
	"strings"
)

// maxCells bounds the comparison table (lines of one middle × the
// other's): 4 Mi cells of 4 bytes.
const maxCells = 4 << 20

// Context is how many unchanged lines stand around each change.
const Context = 3

// op is one line of the edit script.
type op struct {
	kind byte // ' ', '-', '+'
	line string
}

// Unified returns the unified diff from a to b ("" when they are equal),
// with the file names given in its header; ok is false when the change is
// too large to compare.
func Unified(nameA, nameB, a, b string) (diff string, ok bool) {
	if a == b {
		return "", true
	}
	la, lb := lines(a), lines(b)
	head := 0
	for head < len(la) && head < len(lb) && la[head] == lb[head] {
		head++
	}
	tail := 0
	for tail < len(la)-head && tail < len(lb)-head && la[len(la)-1-tail] == lb[len(lb)-1-tail] {
		tail++
	}
	ma, mb := la[head:len(la)-tail], lb[head:len(lb)-tail]
	if (len(ma)+1)*(len(mb)+1) > maxCells {
		return "", false
	}
	script := make([]op, 0, len(la)+len(lb))
	for _, l := range la[:head] {
		script = append(script, op{' ', l})
	}
	script = append(script, lcs(ma, mb)...)
	for _, l := range la[len(la)-tail:] {
		script = append(script, op{' ', l})
	}
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", nameA, nameB)
	writeHunks(&out, script)
	return out.String(), true
}

// lines splits text into lines, each with its newline; a last line
// without one is marked as git marks it.
func lines(text string) []string {
	if text == "" {
		return nil
	}
	parts := strings.SplitAfter(text, "\n")
	if parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	} else {
		parts[len(parts)-1] += "\n\\ No newline at end of file\n"
	}
	return parts
}

// lcs is the edit script from a to b by a longest common subsequence.
func lcs(a, b []string) []op {
	n, m := len(a), len(b)
	// t[i][j]: the length of the LCS of a[i:] and b[j:].
	t := make([]int32, (n+1)*(m+1))
	at := func(i, j int) int32 { return t[i*(m+1)+j] }
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			switch {
			case a[i] == b[j]:
				t[i*(m+1)+j] = at(i+1, j+1) + 1
			case at(i+1, j) >= at(i, j+1):
				t[i*(m+1)+j] = at(i+1, j)
			default:
				t[i*(m+1)+j] = at(i, j+1)
			}
		}
	}
	var out []op
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			out = append(out, op{' ', a[i]})
			i, j = i+1, j+1
		case at(i+1, j) >= at(i, j+1):
			out = append(out, op{'-', a[i]})
			i++
		default:
			out = append(out, op{'+', b[j]})
			j++
		}
	}
	for ; i < n; i++ {
		out = append(out, op{'-', a[i]})
	}
	for ; j < m; j++ {
		out = append(out, op{'+', b[j]})
	}
	return out
}

// writeHunks writes the changes of script with Context lines around them,
// changes closer than twice that in one hunk.
func writeHunks(out *strings.Builder, script []op) {
	// before[k]: how many lines of a and of b come before script[k].
	type lines struct{ a, b int }
	before := make([]lines, len(script)+1)
	for k, o := range script {
		before[k+1] = before[k]
		if o.kind != '+' {
			before[k+1].a++
		}
		if o.kind != '-' {
			before[k+1].b++
		}
	}
	for start := 0; start < len(script); {
		// The next change.
		first := start
		for first < len(script) && script[first].kind == ' ' {
			first++
		}
		if first == len(script) {
			return
		}
		// Its hunk ends where 2*Context unchanged lines follow a change.
		end, same := first, 0
		for k := first; k < len(script); k++ {
			if script[k].kind == ' ' {
				same++
				if same > 2*Context {
					break
				}
			} else {
				same, end = 0, k+1
			}
		}
		from := max(first-Context, start)
		to := min(end+Context, len(script))
		fmt.Fprintf(out, "@@ -%s +%s @@\n", span(before[from].a+1, before[to].a-before[from].a),
			span(before[from].b+1, before[to].b-before[from].b))
		for _, o := range script[from:to] {
			out.WriteByte(o.kind)
			out.WriteString(o.line)
		}
		start = to
	}
}

// span is a hunk header's range: "l,c", "l" for one line, and "l-1,0"
// for none (as diff -u writes an empty side).
func span(line, count int) string {
	switch count {
	case 0:
		return fmt.Sprintf("%d,0", line-1)
	case 1:
		return fmt.Sprintf("%d", line)
	}
	return fmt.Sprintf("%d,%d", line, count)
}
