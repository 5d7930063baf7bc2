package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestDiskPathIndexes checks that checkPathsFree's lookup of a path in the
// checkpoints finds it through the partial indexes of 0007, not by
// scanning every checkpoint.
func TestDiskPathIndexes(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "metadata.db"))
	defer s.Close()
	rows, err := s.reader.Query(`EXPLAIN QUERY PLAN SELECT id FROM checkpoints
			WHERE id != ?1 AND ((disk_path = ?2 AND disk_path != '') OR (memory_path = ?2 AND memory_path != ''))
			LIMIT 1`, "c1", "checkpoints/c1")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(plan, "; ")
	for _, idx := range []string{"checkpoints_disk_path_idx", "checkpoints_memory_path_idx"} {
		if !strings.Contains(joined, idx) {
			t.Errorf("query plan %q does not use %s", plan, idx)
		}
	}
}

// TestDiskPathsUniqueInSchema checks that the schema itself, not only the
// store's check, keeps two checkpoints from naming one disk or memory
// path, while any number have none (the empty path).
func TestDiskPathsUniqueInSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metadata.db")
	s := openT(t, path)
	s.Close()
	db := rawDB(t, path)
	if _, err := db.Exec(`INSERT INTO accounts (id, name, created_at) VALUES (1, 'alice', 'x')`); err != nil {
		t.Fatal(err)
	}
	insert := func(id, disk, memory string) error {
		_, err := db.Exec(`INSERT INTO checkpoints (id, account_id, sandbox_id, sandbox_name, seq, trigger, consistency,
			image, created_at, has_memory, disk_path, memory_path)
			VALUES (?, 1, 's', 'web', ?, 'interval', 'crash', 'debian', 'x', 1, ?, ?)`, id, "auto-"+id, disk, memory)
		return err
	}
	for _, id := range []string{"a", "b"} {
		if err := insert(id, "", ""); err != nil {
			t.Fatalf("checkpoint %s without paths: %v", id, err)
		}
	}
	if err := insert("c", "checkpoints/c", "memory/c"); err != nil {
		t.Fatal(err)
	}
	if err := insert("d", "checkpoints/c", ""); err == nil || !strings.Contains(err.Error(), "UNIQUE") {
		t.Errorf("a second checkpoint with disk path checkpoints/c: err = %v, want a UNIQUE violation", err)
	}
	if err := insert("e", "", "memory/c"); err == nil || !strings.Contains(err.Error(), "UNIQUE") {
		t.Errorf("a second checkpoint with memory path memory/c: err = %v, want a UNIQUE violation", err)
	}
}
