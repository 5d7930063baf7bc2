// Package faultproxy is an HTTP/1.1 proxy for tests that sits on loopback in
// front of a real server (versitygw) and breaks the traffic on demand:
// added latency, 5xx answers with an S3 XML error body, connections reset
// while a request is read or while its response is written, response
// bodies cut short under their full Content-Length, and partitions (every
// connection refused, or accepted and left hanging) for a given time.
//
// Faults are switched at run time with Set and Partition. Which requests a
// fault hits is decided by a random source seeded with Options.Seed, so a
// run's choices can be repeated (the order of concurrent requests still
// varies). Every decision is counted (Stats), for tests to report how many
// faults they injected.
//
// The proxy parses requests and responses only to find where they end; it
// forwards them unchanged otherwise, one upstream connection per client
// connection, keep-alive included.
package faultproxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Faults says what to do to requests from now on. The rates are the
// chances, from 0 to 1, that one request gets that fault; they are tried in
// the order of the fields, and a request gets at most one of them.
type Faults struct {
	// Latency is added before each request is forwarded.
	Latency time.Duration
	// Methods, if not empty, limits the rate faults to requests with these
	// methods (e.g. "PUT" for uploads only, "GET" for downloads only);
	// latency and partitions hit every request.
	Methods []string
	// ErrorRate is the chance of answering 503 Slow Down (or ErrorStatus)
	// with an S3 XML error body instead of forwarding.
	ErrorRate float64
	// ErrorStatus is the status of those answers: 500 or 503 (default).
	ErrorStatus int
	// ResetRequestRate is the chance of resetting the connection (TCP RST)
	// after reading part of the request, before forwarding anything.
	ResetRequestRate float64
	// ResetResponseRate is the chance of forwarding the request (the
	// server acts on it) and resetting the connection partway through the
	// response.
	ResetResponseRate float64
	// TruncateRate is the chance of forwarding the request and sending the
	// response's status and headers, its Content-Length unchanged, with only
	// part of its body, then closing the connection.
	TruncateRate float64
}

// Mode is how a partition treats connections.
type Mode int

const (
	// Refuse closes the listening socket: new connections are refused, and
	// the open ones are reset.
	Refuse Mode = iota
	// Hang accepts connections and never answers on them, nor on the open
	// ones; at the end of the partition they are reset.
	Hang
)

func (m Mode) String() string {
	if m == Hang {
		return "hang"
	}
	return "refuse"
}

// Stats counts what the proxy did.
type Stats struct {
	Requests        int // requests read from clients
	Forwarded       int // requests forwarded upstream
	Errors          int // 5xx answers made up
	ResetRequests   int
	ResetResponses  int
	Truncated       int
	Partitions      int // partitions started
	PartitionDrops  int // connections refused, reset or hung by partitions
	UpstreamFailure int // upstream unreachable or broken (answered with a reset)
}

// Faulted is how many faults were injected: made-up errors, resets,
// truncations and connections a partition broke.
func (s Stats) Faulted() int {
	return s.Errors + s.ResetRequests + s.ResetResponses + s.Truncated + s.PartitionDrops
}

// Options configure a proxy.
type Options struct {
	Seed uint64 // seeds the choice of faulted requests
}

// Proxy forwards connections from Addr to a target address.
type Proxy struct {
	target string
	addr   string

	mu        sync.Mutex
	ln        net.Listener // nil while a Refuse partition runs
	faults    Faults
	rnd       *rand.Rand
	stats     Stats
	partition Mode
	parted    bool
	healed    chan struct{} // closed when the running partition ends
	timer     *time.Timer
	conns     map[net.Conn]bool // client and upstream connections
	closed    bool
	wg        sync.WaitGroup
}

// Start listens on a free loopback port and forwards to target (host:port).
func Start(target string, opts Options) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]bool{},
		rnd: rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))}
	p.serve(ln)
	return p, nil
}

// Addr is the proxy's host:port: point the client here.
func (p *Proxy) Addr() string { return p.addr }

// Set replaces the faults.
func (p *Proxy) Set(f Faults) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = f
}

// Clear removes every fault and ends a running partition.
func (p *Proxy) Clear() {
	p.Set(Faults{})
	p.Heal()
}

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Partition cuts the proxy off for d (until Heal if d is 0). The open
// connections are reset (Refuse) or stop moving (Hang).
func (p *Proxy) Partition(mode Mode, d time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("faultproxy: closed")
	}
	if p.parted {
		p.healLocked()
	}
	p.parted, p.partition, p.healed = true, mode, make(chan struct{})
	p.stats.Partitions++
	if mode == Refuse {
		p.ln.Close()
		p.ln = nil
		for c := range p.conns {
			reset(c)
			p.stats.PartitionDrops++
		}
	}
	if d > 0 {
		p.timer = time.AfterFunc(d, p.Heal)
	}
	return nil
}

// Heal ends a running partition: connections hung by it are reset, and
// the proxy listens again on the same address.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.healLocked()
}

func (p *Proxy) healLocked() {
	if !p.parted {
		return
	}
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	p.parted = false
	close(p.healed)
	if p.partition == Hang {
		for c := range p.conns {
			reset(c)
		}
	}
	if p.ln == nil && !p.closed {
		// The port was ours a moment ago; retry briefly in case the
		// kernel has not let go of it yet.
		for range 50 {
			ln, err := net.Listen("tcp", p.addr)
			if err == nil {
				p.ln = ln
				p.serve(ln)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// Partitioned reports whether a partition runs.
func (p *Proxy) Partitioned() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.parted
}

// Close stops the proxy and resets every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	if p.timer != nil {
		p.timer.Stop()
	}
	if p.ln != nil {
		p.ln.Close()
	}
	for c := range p.conns {
		reset(c)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) serve(ln net.Listener) {
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !p.track(c) {
				reset(c)
				continue
			}
			p.wg.Go(func() { p.handle(c) })
		}
	})
}

// track adds c to the open connections; false once the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = true
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

// reset closes c with a TCP RST rather than a FIN.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// action is what happens to one request.
type action int

const (
	forward action = iota
	answerError
	resetRequest
	resetResponse
	truncate
)

// decide picks the fault of a request with method m, or waits for the end
// of a Hang partition (false: the connection is to be dropped).
func (p *Proxy) decide(method string) (action, time.Duration, int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Requests++
	if p.parted {
		p.stats.PartitionDrops++
		return 0, 0, 0, false
	}
	f := p.faults
	if len(f.Methods) > 0 && !slices.Contains(f.Methods, method) {
		return forward, f.Latency, 0, true
	}
	status := f.ErrorStatus
	if status == 0 {
		status = http.StatusServiceUnavailable
	}
	x := p.rnd.Float64()
	for _, c := range []struct {
		rate float64
		a    action
		n    *int
	}{
		{f.ErrorRate, answerError, &p.stats.Errors},
		{f.ResetRequestRate, resetRequest, &p.stats.ResetRequests},
		{f.ResetResponseRate, resetResponse, &p.stats.ResetResponses},
		{f.TruncateRate, truncate, &p.stats.Truncated},
	} {
		if x < c.rate {
			*c.n++
			return c.a, f.Latency, status, true
		}
		x -= c.rate
	}
	return forward, f.Latency, status, true
}

// hangIfParted blocks while a Hang partition runs and reports whether the
// connection may go on.
func (p *Proxy) hangIfParted() bool {
	p.mu.Lock()
	parted, healed := p.parted, p.healed
	p.mu.Unlock()
	if !parted {
		return true
	}
	<-healed
	return false
}

// handle serves one client connection: request after request, each
// forwarded on one upstream connection (dialled at the first).
func (p *Proxy) handle(client net.Conn) {
	defer p.untrack(client)
	defer client.Close()
	if !p.hangIfParted() {
		p.count(func(s *Stats) { s.PartitionDrops++ })
		reset(client)
		return
	}
	cr := bufio.NewReader(client)
	var up net.Conn
	var ur *bufio.Reader
	defer func() {
		if up != nil {
			p.untrack(up)
			up.Close()
		}
	}()
	for {
		req, err := http.ReadRequest(cr)
		if err != nil {
			return
		}
		act, latency, status, ok := p.decide(req.Method)
		if !ok {
			// A partition: wait it out if it hangs, then drop.
			p.hangIfParted()
			reset(client)
			return
		}
		if latency > 0 {
			time.Sleep(latency)
		}
		switch act {
		case answerError:
			_, _ = io.Copy(io.Discard, req.Body)
			if err := writeError(client, status); err != nil {
				return
			}
			continue
		case resetRequest:
			// Read some of the body (or none, if it has none), then RST.
			_, _ = io.CopyN(io.Discard, req.Body, req.ContentLength/2)
			reset(client)
			return
		}
		if up == nil {
			up, err = net.DialTimeout("tcp", p.target, 5*time.Second)
			if err != nil || !p.track(up) {
				p.countUpstreamFailure()
				reset(client)
				return
			}
			ur = bufio.NewReader(up)
		}
		if err := req.Write(up); err != nil {
			p.countUpstreamFailure()
			reset(client)
			return
		}
		p.count(func(s *Stats) { s.Forwarded++ })
		resp, err := http.ReadResponse(ur, req)
		if err != nil {
			p.countUpstreamFailure()
			reset(client)
			return
		}
		if act == resetResponse || act == truncate {
			if req.Method == http.MethodHead {
				// No body to cut: the answer is lost whole.
				resp.Body.Close()
				reset(client)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			resp.ContentLength = int64(len(b))
			writeHead(client, resp)
			_, _ = client.Write(b[:len(b)/2])
			if act == resetResponse {
				reset(client)
			} else {
				client.Close() // a clean close: only the length says it is cut
			}
			return
		}
		err = resp.Write(client)
		resp.Body.Close()
		if err != nil || resp.Close || req.Close {
			return
		}
	}
}

func (p *Proxy) count(f func(*Stats)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(&p.stats)
}

func (p *Proxy) countUpstreamFailure() { p.count(func(s *Stats) { s.UpstreamFailure++ }) }

// writeHead writes resp's status line and headers, with its full
// Content-Length.
func writeHead(w io.Writer, resp *http.Response) {
	h := resp.Header.Clone()
	h.Del("Transfer-Encoding")
	h.Set("Content-Length", strconv.FormatInt(max(resp.ContentLength, 0), 10))
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "HTTP/1.1 %s\r\n", resp.Status)
	_ = h.Write(bw)
	bw.WriteString("\r\n")
	_ = bw.Flush()
}

// writeError writes an S3 error answer with status (500 or 503).
func writeError(w io.Writer, status int) error {
	code, msg := "SlowDown", "Please reduce your request rate."
	if status == http.StatusInternalServerError {
		code, msg = "InternalError", "We encountered an internal error. Please try again."
	}
	body := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<Error><Code>%s</Code><Message>%s</Message><RequestId>faultproxy</RequestId></Error>`, code, msg)
	_, err := fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
	return err
}
