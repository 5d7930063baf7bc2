package offsite

import (
	"context"
	"testing"
	"time"
)

type uploads struct {
	n, failed int
	bytes     int64
}

func (u *uploads) Uploaded(bytes int64, err error) {
	u.n++
	u.bytes += bytes
	if err != nil {
		u.failed++
	}
}

// The lag is the age of the oldest checkpoint not both locations hold: it
// is 0 once they hold every one, and grows again while one location is
// down. Each upload is told to the observer with the bytes it stored.
func TestOffsiteLagAndUploadObserver(t *testing.T) {
	f := newFixture(t)
	obs := &uploads{}
	f.svc.SetObserver(obs)
	ck := f.checkpoint("c1", map[string][]byte{"a": randomBytes(t, 300<<10)})
	now := ck.CreatedAt.Add(90 * time.Second)
	f.svc.now = func() time.Time { return now }
	lag := func() time.Duration {
		t.Helper()
		account, d, ok, err := f.svc.OffsiteLag(context.Background())
		if err != nil || !ok || account != "default" {
			t.Fatalf("OffsiteLag: %q %v %v %v", account, d, ok, err)
		}
		return d
	}
	if d := lag(); d != 90*time.Second {
		t.Errorf("lag before the upload: %v, want 90s", d)
	}
	f.drain()
	if d := lag(); d != 0 {
		t.Errorf("lag with every checkpoint off-site: %v", d)
	}
	if obs.n != 1 || obs.failed != 0 || obs.bytes <= 300<<10 {
		t.Errorf("uploads observed: %+v, want one of more than the file's 300 KiB (two locations)", obs)
	}

	restore := f.breakLocation(1)
	ck2 := f.checkpoint("c2", map[string][]byte{"b": randomBytes(t, 1<<10)})
	now = ck2.CreatedAt.Add(time.Minute)
	f.drain()
	if d := lag(); d != time.Minute {
		t.Errorf("lag with one location down: %v, want 1m", d)
	}
	restore()

	f.cfg.Disabled = true
	f.restart()
	if _, _, ok, err := f.svc.OffsiteLag(context.Background()); ok || err != nil {
		t.Errorf("off-site copies off: ok %v, err %v", ok, err)
	}
}
