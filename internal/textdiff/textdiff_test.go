package textdiff

import (
	"strings"
	"testing"
)

func TestUnified(t *testing.T) {
	// Seven unchanged lines between the changes: two hunks (six or fewer
	// make one, as diff -u does).
	a := "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\neleven\n"
	b := "one\ntwo\nthree\nFOUR\nfive\nsix\nseven\neight\nnine\nten\neleven\ntwelve\n"
	got, ok := Unified("a/f", "b/f", a, b)
	want := "--- a/f\n+++ b/f\n" +
		"@@ -1,7 +1,7 @@\n one\n two\n three\n-four\n+FOUR\n five\n six\n seven\n" +
		"@@ -9,3 +9,4 @@\n nine\n ten\n eleven\n+twelve\n"
	if !ok || got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if d, ok := Unified("a", "b", a, a); !ok || d != "" {
		t.Fatalf("equal texts: %q", d)
	}
	// From nothing, to nothing, and a last line without a newline.
	if d, _ := Unified("a", "b", "", "x\n"); d != "--- a\n+++ b\n@@ -0,0 +1 @@\n+x\n" {
		t.Fatalf("added: %q", d)
	}
	if d, _ := Unified("a", "b", "x\ny\n", ""); d != "--- a\n+++ b\n@@ -1,2 +0,0 @@\n-x\n-y\n" {
		t.Fatalf("removed: %q", d)
	}
	if d, _ := Unified("a", "b", "x\n", "x"); !strings.Contains(d, "+x\n\\ No newline at end of file") {
		t.Fatalf("no newline at the end: %q", d)
	}
}

// A change spread over a huge text is refused, not computed.
func TestUnifiedTooLarge(t *testing.T) {
	var a, b strings.Builder
	for i := range 5000 {
		a.WriteString("a" + strings.Repeat("x", i%7) + "\n")
		b.WriteString("b" + strings.Repeat("y", i%5) + "\n")
	}
	if _, ok := Unified("a", "b", a.String(), b.String()); ok {
		t.Fatal("a 5000×5000 comparison was made")
	}
}
