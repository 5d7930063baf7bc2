package repo

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

func TestBackupProgress(t *testing.T) {
	f := newFixture(t)
	src := filepath.Join(t.TempDir(), "src")
	for i := range 4 {
		write(t, filepath.Join(src, string(rune('a'+i))), randomBytes(8<<20, uint64(i)))
	}
	var calls []Stats
	var times []time.Time
	var inside atomic.Int32
	progress := func(st Stats) {
		if inside.Add(1) != 1 {
			t.Error("progress called concurrently with itself")
		}
		defer inside.Add(-1)
		calls = append(calls, st)
		times = append(times, time.Now())
		time.Sleep(10 * time.Millisecond) // a slow caller must not see overlapping calls
	}
	_, st, err := f.repo.Backup(context.Background(), src, BackupOptions{Progress: progress})
	must(t, err)
	if len(calls) < 2 {
		t.Fatalf("progress called %d times", len(calls))
	}
	last := calls[len(calls)-1]
	if last.BytesRead != st.BytesRead || last.BytesUploaded != st.BytesUploaded || last.FilesRead != st.FilesRead || last.Packs != st.Packs {
		t.Errorf("last progress %+v, final stats %+v", last, st)
	}
	if st.BytesRead != 32<<20 || st.FilesRead != 4 {
		t.Errorf("stats %+v", st)
	}
	for i := 1; i < len(calls); i++ {
		if calls[i].BytesRead < calls[i-1].BytesRead || calls[i].BytesUploaded < calls[i-1].BytesUploaded {
			t.Errorf("progress went backwards: %+v then %+v", calls[i-1], calls[i])
		}
		// Every report but the final one waits progressEvery after the previous.
		if i < len(calls)-1 && times[i].Sub(times[i-1]) < progressEvery-5*time.Millisecond {
			t.Errorf("reports %d and %d only %v apart", i-1, i, times[i].Sub(times[i-1]))
		}
	}
}

func TestRestoreProgress(t *testing.T) {
	f := newFixture(t)
	src := filepath.Join(t.TempDir(), "src")
	for i := range 4 {
		write(t, filepath.Join(src, string(rune('a'+i))), randomBytes(8<<20, uint64(i)))
	}
	write(t, filepath.Join(src, "empty"), nil)
	must(t, os.Link(filepath.Join(src, "a"), filepath.Join(src, "a-link")))
	sp, err := os.Create(filepath.Join(src, "sparse"))
	must(t, err)
	_, err = sp.WriteAt(randomBytes(8192, 9), 32<<20)
	must(t, err)
	must(t, sp.Close())
	ref, st := f.backup(t, src, nil)

	var calls []RestoreStats
	var inside atomic.Int32
	progress := func(st RestoreStats) {
		if inside.Add(1) != 1 {
			t.Error("progress called concurrently with itself")
		}
		defer inside.Add(-1)
		calls = append(calls, st)
		time.Sleep(10 * time.Millisecond)
	}
	dst := filepath.Join(t.TempDir(), "dst")
	must(t, f.repo.Restore(context.Background(), ref, dst, RestoreOptions{Progress: progress}))
	compareTrees(t, src, dst)
	if len(calls) < 2 {
		t.Fatalf("progress called %d times", len(calls))
	}
	want := RestoreStats{Files: 6, FilesTotal: 6, BytesWritten: 32<<20 + 8192, BytesTotal: 32<<20 + 8192}
	if last := calls[len(calls)-1]; last != want || st.BytesRead != want.BytesTotal {
		t.Errorf("last progress %+v, want %+v (backup read %d bytes)", last, want, st.BytesRead)
	}
	for i := 1; i < len(calls); i++ {
		if calls[i].BytesWritten < calls[i-1].BytesWritten || calls[i].Files < calls[i-1].Files ||
			calls[i].BytesTotal != want.BytesTotal || calls[i].FilesTotal != want.FilesTotal {
			t.Errorf("progress %+v then %+v", calls[i-1], calls[i])
		}
	}
	if calls[0].BytesWritten >= want.BytesTotal {
		t.Errorf("first report %+v is already the end", calls[0])
	}
}
