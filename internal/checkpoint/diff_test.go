package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func write(t *testing.T, root, rel, content string, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// Two temp dirs stand in for a snapshot and the live tree. Files unchanged
// in a snapshot keep their inode; here a hard link plays that part.
func TestDiffFindsAddedRemovedAndChanged(t *testing.T) {
	from, to := t.TempDir(), t.TempDir()
	past := time.Now().Add(-time.Hour)
	for _, root := range []string{from, to} {
		write(t, root, "etc/hosts", "127.0.0.1 localhost\n", 0o644)
		write(t, root, "etc/same", "same\n", 0o644)
		write(t, root, "root/mode", "x", 0o644)
		write(t, root, "old/dir/file", "x", 0o644)
		os.Chtimes(filepath.Join(root, "etc/same"), past, past)
	}
	// Same content and times but different inodes count as unchanged only
	// when the inode is the same; make "same" identical by hard-linking.
	os.Remove(filepath.Join(to, "etc/same"))
	if err := os.Link(filepath.Join(from, "etc/same"), filepath.Join(to, "etc/same")); err != nil {
		t.Fatal(err)
	}
	write(t, to, "etc/hosts", "127.0.0.1 localhost\n10.0.0.1 other\n", 0o644)
	os.Chmod(filepath.Join(to, "root/mode"), 0o600)
	os.RemoveAll(filepath.Join(to, "old"))
	write(t, to, "new/a/b", "new", 0o644)
	os.Symlink("/etc/hosts", filepath.Join(to, "link"))

	got, err := Diff(context.Background(), from, to)
	if err != nil {
		t.Fatal(err)
	}
	want := []Change{
		{Path: "/etc/hosts", Kind: Changed, What: []string{"content"}},
		{Path: "/link", Kind: Added},
		{Path: "/new", Kind: Added},
		{Path: "/new/a", Kind: Added},
		{Path: "/new/a/b", Kind: Added},
		{Path: "/old", Kind: Removed},
		{Path: "/old/dir", Kind: Removed},
		{Path: "/old/dir/file", Kind: Removed},
		{Path: "/root/mode", Kind: Changed, What: []string{"content", "mode"}, Mode: "0644 -> 0600"},
	}
	// root/mode is a different inode in the two temp dirs, so its content
	// counts as changed too; on btrfs snapshots the inode is kept.
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("diff:\n got %+v\nwant %+v", got, want)
	}
}

func TestDiffOfATreeWithItselfIsEmpty(t *testing.T) {
	root := t.TempDir()
	write(t, root, "a/b/c", "x", 0o644)
	got, err := Diff(context.Background(), root, root)
	if err != nil || len(got) != 0 {
		t.Fatalf("self diff: %v %v", got, err)
	}
}
