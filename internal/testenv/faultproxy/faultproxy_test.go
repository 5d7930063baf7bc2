package faultproxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

// body is what the upstream server answers to every request.
var body = strings.Repeat("0123456789", 10000)

func start(t *testing.T) (*Proxy, *http.Client) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	p, err := Start(strings.TrimPrefix(srv.URL, "http://"), Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: false}}
	return p, c
}

func get(c *http.Client, p *Proxy, method string) (int, string, error) {
	req, _ := http.NewRequest(method, "http://"+p.Addr()+"/x", strings.NewReader("payload"))
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func TestEachFault(t *testing.T) {
	p, c := start(t)
	if code, b, err := get(c, p, "GET"); err != nil || code != 200 || b != body {
		t.Fatalf("no faults: %d %d bytes %v", code, len(b), err)
	}

	p.Set(Faults{ErrorRate: 1, ErrorStatus: 500})
	if code, b, err := get(c, p, "GET"); err != nil || code != 500 || !strings.Contains(b, "<Code>InternalError</Code>") {
		t.Fatalf("error answer: %d %q %v", code, b, err)
	}

	p.Set(Faults{TruncateRate: 1})
	if _, b, err := get(c, p, "GET"); !errors.Is(err, io.ErrUnexpectedEOF) || len(b) != len(body)/2 {
		t.Fatalf("truncated: %d bytes, %v", len(b), err)
	}

	p.Set(Faults{ResetResponseRate: 1})
	if _, _, err := get(c, p, "GET"); err == nil {
		t.Fatal("reset response: no error")
	}

	p.Set(Faults{ResetRequestRate: 1})
	if _, _, err := get(c, p, "PUT"); err == nil {
		t.Fatal("reset request: no error")
	}

	// Methods limits the rate faults.
	p.Set(Faults{ErrorRate: 1, Methods: []string{"PUT"}})
	if code, _, err := get(c, p, "GET"); err != nil || code != 200 {
		t.Fatalf("GET with PUT faults: %d %v", code, err)
	}

	p.Set(Faults{Latency: 200 * time.Millisecond})
	t0 := time.Now()
	if _, _, err := get(c, p, "GET"); err != nil || time.Since(t0) < 200*time.Millisecond {
		t.Fatalf("latency: %v after %v", err, time.Since(t0))
	}

	st := p.Stats()
	if st.Errors != 1 || st.Truncated != 1 || st.ResetResponses != 1 || st.ResetRequests != 1 || st.Faulted() != 4 {
		t.Fatalf("stats: %+v", st)
	}
}

func TestPartitions(t *testing.T) {
	p, c := start(t)
	if _, _, err := get(c, p, "GET"); err != nil {
		t.Fatal(err)
	}
	if err := p.Partition(Refuse, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("tcp", p.Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial during a refuse partition: %v", err)
	}
	time.Sleep(400 * time.Millisecond)
	if code, _, err := get(c, p, "GET"); err != nil || code != 200 {
		t.Fatalf("after the partition: %d %v", code, err)
	}

	if err := p.Partition(Hang, 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+p.Addr()+"/x", nil)
	if _, err := c.Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("request during a hang partition: %v", err)
	}
	p.Heal()
	if code, _, err := get(c, p, "GET"); err != nil || code != 200 {
		t.Fatalf("after healing: %d %v", code, err)
	}
	if st := p.Stats(); st.Partitions != 2 || st.PartitionDrops < 1 {
		t.Fatalf("stats: %+v", st)
	}
}

// The same seed picks the same requests.
func TestSeedRepeats(t *testing.T) {
	pick := func() []int {
		p, c := start(t)
		p.Set(Faults{ErrorRate: 0.5})
		var got []int
		for range 20 {
			code, _, _ := get(c, p, "GET")
			got = append(got, code)
		}
		return got
	}
	a, b := pick(), pick()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed 1 gave %v then %v", a, b)
		}
	}
}
