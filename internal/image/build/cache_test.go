package build

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The step cache is per account: two accounts building the same
// Dockerfile on the same context each run every step and get entries of
// their own, each image made of its own account's steps; the same
// account building it again hits its own entries for every step.
func TestStepCacheIsPerAccount(t *testing.T) {
	tb := newTestBuilder(t)
	n := 0
	tb.runner.run = func(_ context.Context, spec RunSpec) (int, error) {
		n++
		return 0, os.WriteFile(filepath.Join(spec.Root, "ran"), fmt.Appendf(nil, "run %d", n), 0o644)
	}
	const df = "FROM base\nCOPY f /f\nRUN make\nWORKDIR /app\n"
	files := map[string]string{"f": "same file\n"}
	const alice, bob = 2, 3

	out, err := tb.build(alice, df, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cached(out) != 0 || tb.runner.count() != 1 {
		t.Fatalf("alice's first build: %d cached, %d runs:\n%s", cached(out), tb.runner.count(), strings.Join(out, "\n"))
	}
	aliceKeys := keysOf(t, tb, alice)
	if len(aliceKeys) != 3 {
		t.Fatalf("alice has %d entries, want 3 (COPY, RUN, WORKDIR): %q", len(aliceKeys), aliceKeys)
	}

	out, err = tb.build(bob, df, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cached(out) != 0 || tb.runner.count() != 2 {
		t.Fatalf("bob's build of the same Dockerfile hit alice's cache: %d cached, %d runs:\n%s", cached(out), tb.runner.count(), strings.Join(out, "\n"))
	}
	bobKeys := keysOf(t, tb, bob)
	if len(bobKeys) != 3 {
		t.Fatalf("bob has %d entries, want 3: %q", len(bobKeys), bobKeys)
	}
	for _, k := range bobKeys {
		if slices.Contains(aliceKeys, k) {
			t.Errorf("entry %s is both alice's and bob's", k)
		}
	}
	if got := keysOf(t, tb, alice); !slices.Equal(got, aliceKeys) {
		t.Errorf("bob's build changed alice's entries: %q, was %q", got, aliceKeys)
	}

	out, err = tb.build(alice, df, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cached(out) != 3 || tb.runner.count() != 2 {
		t.Fatalf("alice's second build: %d cached, %d runs, want 3 cached and no run:\n%s", cached(out), tb.runner.count(), strings.Join(out, "\n"))
	}
	out, err = tb.build(bob, df, files, nil)
	if err != nil || cached(out) != 3 || tb.runner.count() != 2 {
		t.Fatalf("bob's second build: %v, %d cached, %d runs", err, cached(out), tb.runner.count())
	}
	if want := []string{"run 1", "run 2", "run 1", "run 2"}; !slices.Equal(tb.images.installed, want) {
		t.Errorf("images made of the steps %q, want %q (each account's own)", tb.images.installed, want)
	}
	if es, err := tb.cache.Entries(); err != nil || len(es) != 6 {
		t.Errorf("%d entries in all (%v), want 6", len(es), err)
	}
	tb.leftovers()
}

// A build needs an account.
func TestBuildWithoutAccount(t *testing.T) {
	b := New(nil, nil, nil, nil)
	if _, err := b.Build(context.Background(), Request{Dockerfile: []byte("FROM base\n")}, nil); err == nil {
		t.Fatal("a build of no account ran")
	}
}

// cached counts the "(cached)" steps of a build's output.
func cached(out []string) int {
	n := 0
	for _, l := range out {
		if strings.HasSuffix(l, "(cached)") {
			n++
		}
	}
	return n
}

// keysOf is the keys of account's cache entries.
func keysOf(t *testing.T, tb *testBuilder, account int64) []string {
	t.Helper()
	es, err := tb.cache.EntriesOf(account)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range es {
		if e.Account != account || !strings.HasPrefix(e.Key, fmt.Sprintf("step-%d-", account)) {
			t.Errorf("entry %+v listed as account %d's", e, account)
		}
		keys = append(keys, e.Key)
	}
	slices.Sort(keys)
	return keys
}
