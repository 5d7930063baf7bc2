package postgres

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/metadata/storetest"
	"github.com/cairn-sandbox/cairn/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestStore runs the shared suite, each test on a database of its own.
func TestStore(t *testing.T) {
	var (
		mu   sync.Mutex
		urls = map[*testing.T]string{}
	)
	storetest.Run(t, func(t *testing.T, now func() time.Time) metadata.Store {
		mu.Lock()
		url, ok := urls[t]
		if !ok {
			url = pgtest.New(t)
			urls[t] = url
		}
		mu.Unlock()
		s, err := Open(context.Background(), url, now)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
