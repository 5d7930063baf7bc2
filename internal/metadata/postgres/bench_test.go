package postgres

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/metadata/sqlite"
	"github.com/cairn-sandbox/cairn/internal/testenv/pgtest"
)

// BenchmarkCheckpointMetadata makes the store calls of one disk
// checkpoint (the sandbox's lease, the row, its sizes, the release) on
// SQLite and on PostgreSQL side by side, so that one run compares them:
//
//	go test -run '^$' -bench CheckpointMetadata ./internal/metadata/postgres
//
// The PostgreSQL server is the tests' (unix socket, fsync off): what it
// shows is the store's own cost (round trips, transactions), not a disk's.
func BenchmarkCheckpointMetadata(b *testing.B) {
	open := map[string]func(b *testing.B) metadata.Store{
		"sqlite": func(b *testing.B) metadata.Store {
			s, err := sqlite.Open(filepath.Join(b.TempDir(), "cairn.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			return s
		},
		"postgres": func(b *testing.B) metadata.Store {
			s, err := Open(context.Background(), pgtest.New(b), nil)
			if err != nil {
				b.Fatal(err)
			}
			return s
		},
	}
	for _, name := range []string{"sqlite", "postgres"} {
		b.Run(name, func(b *testing.B) {
			s := open[name](b)
			defer s.Close()
			ctx := context.Background()
			a, err := s.EnsureAccount(ctx, "alice")
			if err != nil {
				b.Fatal(err)
			}
			sb := metadata.Sandbox{ID: "0000000000000001", AccountID: a.ID, Name: "web", Image: "debian", State: metadata.SandboxRunning}
			if err := s.CreateSandbox(ctx, sb); err != nil {
				b.Fatal(err)
			}
			for i := 0; b.Loop(); i++ {
				id := fmt.Sprintf("c%015x", i)
				l, err := s.AcquireLease(ctx, metadata.Lease{ID: "l" + id, Resource: "sandbox/" + sb.ID, Exclusive: true,
					Owner: "host/h/1", Purpose: "checkpoint", Expires: time.Now().Add(time.Minute)})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.CreateCheckpoint(ctx, metadata.Checkpoint{ID: id, AccountID: a.ID, SandboxID: sb.ID,
					SandboxName: sb.Name, Trigger: metadata.TriggerManual, Consistency: metadata.ConsistencyFrozen,
					Image: sb.Image, DiskPath: "checkpoints/" + id}); err != nil {
					b.Fatal(err)
				}
				if err := s.SetCheckpointSize(ctx, id, 4096, 8192); err != nil {
					b.Fatal(err)
				}
				if err := s.ReleaseLease(ctx, l.ID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
