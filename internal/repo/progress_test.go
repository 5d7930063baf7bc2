package repo

import (
	"context"
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
