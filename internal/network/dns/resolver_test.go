package dns

import (
	"context"
	"maps"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// recorder is a Config.Resolved that remembers what it was told; each call
// takes delay, as an nftables update would.
type recorder struct {
	delay time.Duration
	mu    sync.Mutex
	got   map[string]time.Duration
}

func (rc *recorder) resolved(a netip.Addr, ttl time.Duration) {
	time.Sleep(rc.delay)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.got == nil {
		rc.got = map[string]time.Duration{}
	}
	rc.got[a.String()] = ttl
}

func (rc *recorder) addrs() map[string]time.Duration {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return maps.Clone(rc.got)
}

func setup(t *testing.T, p Policy) (*testUpstream, *testResolver, *recorder) {
	t.Helper()
	up := startUpstream(t)
	rc := &recorder{}
	r := startResolver(t, Config{Upstream: up.addr, Policy: p, Resolved: rc.resolved, Timeout: time.Second})
	return up, r, rc
}

func ask(t *testing.T, r *testResolver, name string, typ dnsmessage.Type) *dnsmessage.Message {
	t.Helper()
	m, _, err := exchange(r.udp, newQuery(t, name, typ, false), 3*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if m.ID != 0x4242 || !m.Response || len(m.Questions) != 1 || m.Questions[0].Name.String() != name {
		t.Fatalf("%s: the answer does not answer the query: %+v", name, m.Header)
	}
	return m
}

func TestAllowedNameIsReportedBeforeTheAnswer(t *testing.T) {
	up, r, rc := setup(t, Policy{Allow: []string{"api.example.com"}})
	rc.delay = 150 * time.Millisecond // the answer must wait for it

	m := ask(t, r, "api.example.com.", dnsmessage.TypeA)
	if m.RCode != dnsmessage.RCodeSuccess || !slices.Equal(answerAddrs(m), []string{"192.0.2.10"}) {
		t.Fatalf("answer %v %v", m.RCode, answerAddrs(m))
	}
	// Read as soon as the answer is in: the address must be reported already.
	if got := rc.addrs(); !maps.Equal(got, map[string]time.Duration{"192.0.2.10": 300 * time.Second}) {
		t.Fatalf("reported before the answer: %v", got)
	}
	m = ask(t, r, "API.Example.COM.", dnsmessage.TypeAAAA) // case does not matter
	if !slices.Equal(answerAddrs(m), []string{"2001:db8::10"}) {
		t.Fatalf("AAAA answer %v", answerAddrs(m))
	}
	if _, ok := rc.addrs()["2001:db8::10"]; !ok {
		t.Fatalf("AAAA address not reported: %v", rc.addrs())
	}
	if up.queries.Load() != 2 {
		t.Fatalf("upstream got %d queries, want 2", up.queries.Load())
	}
}

func TestDeniedNameFailsAtOnceWithoutTheUpstream(t *testing.T) {
	up, r, rc := setup(t, Policy{Deny: []string{"*.example.com", "other.test"}})
	up.delay.Store(int64(2 * time.Second)) // anything forwarded would show

	for _, name := range []string{"api.example.com.", "a.b.example.com.", "OTHER.test."} {
		start := time.Now()
		m := ask(t, r, name, dnsmessage.TypeA)
		if m.RCode != dnsmessage.RCodeNameError || len(m.Answers) != 0 {
			t.Fatalf("%s: rcode %v, %d answers; want NXDOMAIN and none", name, m.RCode, len(m.Answers))
		}
		if took := time.Since(start); took > 500*time.Millisecond {
			t.Fatalf("%s: NXDOMAIN took %v", name, took)
		}
		if q := m.Questions[0]; q.Type != dnsmessage.TypeA || q.Class != dnsmessage.ClassINET {
			t.Fatalf("%s: question echoed as %+v", name, q)
		}
	}
	if n := up.queries.Load(); n != 0 {
		t.Fatalf("the upstream saw %d queries for denied names: %v", n, up.seen())
	}
	if got := rc.addrs(); len(got) != 0 {
		t.Fatalf("reported for denied names: %v", got)
	}
}

func TestNeutralNameResolvesUnreported(t *testing.T) {
	up, r, rc := setup(t, Policy{Allow: []string{"api.example.com"}, Deny: []string{"web.example.com"}})
	m := ask(t, r, "other.test.", dnsmessage.TypeA)
	if m.RCode != dnsmessage.RCodeSuccess || !slices.Equal(answerAddrs(m), []string{"192.0.2.30"}) {
		t.Fatalf("answer %v %v", m.RCode, answerAddrs(m))
	}
	// The upstream's own NXDOMAIN passes through.
	if m := ask(t, r, "nowhere.test.", dnsmessage.TypeA); m.RCode != dnsmessage.RCodeNameError {
		t.Fatalf("unknown name: %v", m.RCode)
	}
	if got := rc.addrs(); len(got) != 0 {
		t.Fatalf("neutral names reported: %v", got)
	}
	if up.queries.Load() != 2 {
		t.Fatalf("upstream got %d queries, want 2", up.queries.Load())
	}
}

func TestAllowBeatsDeny(t *testing.T) {
	_, r, rc := setup(t, Policy{Allow: []string{"api.example.com"}, Deny: []string{"*.example.com"}})
	if m := ask(t, r, "api.example.com.", dnsmessage.TypeA); m.RCode != dnsmessage.RCodeSuccess || len(m.Answers) != 1 {
		t.Fatalf("allowed under a denied wildcard: %v, %d answers", m.RCode, len(m.Answers))
	}
	if m := ask(t, r, "web.example.com.", dnsmessage.TypeA); m.RCode != dnsmessage.RCodeNameError {
		t.Fatalf("web.example.com: %v, want NXDOMAIN", m.RCode)
	}
	if got := rc.addrs(); !maps.Equal(got, map[string]time.Duration{"192.0.2.10": 300 * time.Second}) {
		t.Fatalf("reported %v", got)
	}
}

func TestSetPolicyChangesTheNextAnswer(t *testing.T) {
	_, r, rc := setup(t, Policy{})
	if m := ask(t, r, "web.example.com.", dnsmessage.TypeA); m.RCode != dnsmessage.RCodeSuccess {
		t.Fatalf("before: %v", m.RCode)
	}
	if err := r.SetPolicy(Policy{Deny: []string{"web.example.com"}}); err != nil {
		t.Fatal(err)
	}
	if m := ask(t, r, "web.example.com.", dnsmessage.TypeA); m.RCode != dnsmessage.RCodeNameError {
		t.Fatalf("after deny: %v", m.RCode)
	}
	if err := r.SetPolicy(Policy{Allow: []string{"*.example.com"}}); err != nil {
		t.Fatal(err)
	}
	if m := ask(t, r, "web.example.com.", dnsmessage.TypeA); m.RCode != dnsmessage.RCodeSuccess {
		t.Fatalf("after allow: %v", m.RCode)
	}
	if _, ok := rc.addrs()["192.0.2.11"]; !ok {
		t.Fatalf("not reported once allowed: %v", rc.addrs())
	}
	// An invalid policy is refused and the one before stays.
	if err := r.SetPolicy(Policy{Deny: []string{"*"}}); err == nil {
		t.Fatal(`SetPolicy accepted "*"`)
	}
	if m := ask(t, r, "web.example.com.", dnsmessage.TypeA); m.RCode != dnsmessage.RCodeSuccess {
		t.Fatalf("after a refused SetPolicy: %v", m.RCode)
	}
}

func TestCNAMEChainCountsForTheAllowedName(t *testing.T) {
	_, r, rc := setup(t, Policy{Allow: []string{"www.example.com", "extra.test", "loop.test"}})
	m := ask(t, r, "www.example.com.", dnsmessage.TypeA)
	if len(m.Answers) != 3 || !slices.Equal(answerAddrs(m), []string{"192.0.2.20"}) {
		t.Fatalf("answer: %d records, addresses %v", len(m.Answers), answerAddrs(m))
	}
	if got := rc.addrs(); !maps.Equal(got, map[string]time.Duration{"192.0.2.20": 300 * time.Second}) {
		t.Fatalf("reported %v, want the chain's target's address", got)
	}
	// A record of another name in the answer is passed on, not reported.
	m = ask(t, r, "extra.test.", dnsmessage.TypeA)
	if !slices.Equal(answerAddrs(m), []string{"192.0.2.40", "198.51.100.200"}) {
		t.Fatalf("extra.test answer %v", answerAddrs(m))
	}
	if _, ok := rc.addrs()["198.51.100.200"]; ok {
		t.Fatalf("the address of %s was reported for extra.test", strayName)
	}
	if _, ok := rc.addrs()["192.0.2.40"]; !ok {
		t.Fatalf("extra.test's own address was not reported: %v", rc.addrs())
	}
	// A CNAME loop ends.
	if m := ask(t, r, "loop.test.", dnsmessage.TypeA); len(answerAddrs(m)) != 0 {
		t.Fatalf("loop answer %v", answerAddrs(m))
	}
}

func TestTTLsAreClamped(t *testing.T) {
	_, r, rc := setup(t, Policy{Allow: []string{"*.test"}})
	ask(t, r, "zero.test.", dnsmessage.TypeA)
	m := ask(t, r, "week.test.", dnsmessage.TypeA)
	want := map[string]time.Duration{"192.0.2.31": MinTTL, "192.0.2.32": MaxTTL}
	if got := rc.addrs(); !maps.Equal(got, want) {
		t.Fatalf("reported %v, want %v", got, want)
	}
	if ttl := m.Answers[0].Header.TTL; time.Duration(ttl)*time.Second != MaxTTL {
		t.Fatalf("the guest was told TTL %ds for an address open for %v", ttl, MaxTTL)
	}
	// A neutral name's TTL passes unchanged.
	r.SetPolicy(Policy{})
	if m := ask(t, r, "week.test.", dnsmessage.TypeA); m.Answers[0].Header.TTL != 7*24*3600 {
		t.Fatalf("neutral TTL %d", m.Answers[0].Header.TTL)
	}
}

func TestUpstreamTimeoutIsServfail(t *testing.T) {
	up := startUpstream(t)
	up.delay.Store(int64(3 * time.Second))
	const timeout = 300 * time.Millisecond
	r := startResolver(t, Config{Upstream: up.addr, Timeout: timeout})
	start := time.Now()
	m := ask(t, r, "other.test.", dnsmessage.TypeA)
	took := time.Since(start)
	if m.RCode != dnsmessage.RCodeServerFailure {
		t.Fatalf("rcode %v, want SERVFAIL", m.RCode)
	}
	if took < timeout || took > timeout+700*time.Millisecond {
		t.Fatalf("SERVFAIL after %v, Timeout is %v", took, timeout)
	}
}

func TestUpstreamWithTheWrongIDIsNotBelieved(t *testing.T) {
	up := startUpstream(t)
	up.wrongID.Store(true)
	rc := &recorder{}
	r := startResolver(t, Config{Upstream: up.addr, Policy: Policy{Allow: []string{"*.example.com"}}, Resolved: rc.resolved, Timeout: 300 * time.Millisecond})
	m := ask(t, r, "api.example.com.", dnsmessage.TypeA)
	if m.RCode != dnsmessage.RCodeServerFailure || len(m.Answers) != 0 {
		t.Fatalf("rcode %v, %d answers; want SERVFAIL and none", m.RCode, len(m.Answers))
	}
	if got := rc.addrs(); len(got) != 0 {
		t.Fatalf("an answer with the wrong id was reported: %v", got)
	}
}

func TestUpstreamDownIsServfailAtOnce(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close() // nothing listens there: the kernel answers port unreachable
	r := startResolver(t, Config{Upstream: addr, Timeout: 3 * time.Second})
	start := time.Now()
	if m := ask(t, r, "other.test.", dnsmessage.TypeA); m.RCode != dnsmessage.RCodeServerFailure {
		t.Fatalf("rcode %v", m.RCode)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("SERVFAIL took %v with the upstream refusing", took)
	}
}

func TestTCPClients(t *testing.T) {
	up, r, rc := setup(t, Policy{Allow: []string{"big.test"}})
	// Two queries pipelined on one connection.
	ms, err := exchangeTCP(r.tcp, 3*time.Second, newQuery(t, "api.example.com.", dnsmessage.TypeA, false), newQuery(t, "other.test.", dnsmessage.TypeA, true))
	if err != nil {
		t.Fatal(err)
	}
	got := append(answerAddrs(ms[0]), answerAddrs(ms[1])...)
	slices.Sort(got)
	if !slices.Equal(got, []string{"192.0.2.10", "192.0.2.30"}) {
		t.Fatalf("answers %v", got)
	}

	// A UDP answer that does not fit 512 bytes: the upstream truncates it;
	// a UDP client gets the truncated answer, a TCP client the whole one,
	// fetched over TCP.
	m := ask(t, r, "big.test.", dnsmessage.TypeA)
	if !m.Truncated || len(m.Answers) != 0 {
		t.Fatalf("UDP client: TC %v, %d answers; want the truncated answer", m.Truncated, len(m.Answers))
	}
	ms, err = exchangeTCP(r.tcp, 3*time.Second, newQuery(t, "big.test.", dnsmessage.TypeA, false))
	if err != nil {
		t.Fatal(err)
	}
	if ms[0].Truncated || len(ms[0].Answers) != 60 {
		t.Fatalf("TCP client: TC %v, %d answers; want all 60", ms[0].Truncated, len(ms[0].Answers))
	}
	if len(rc.addrs()) != 60 {
		t.Fatalf("%d addresses reported, want 60", len(rc.addrs()))
	}
	// With EDNS it fits over UDP (on the upstream's side too).
	before := up.tcpQueries.Load()
	up.truncateUDP.Store(true) // ...unless the upstream truncates anyway
	ms, err = exchangeTCP(r.tcp, 3*time.Second, newQuery(t, "big.test.", dnsmessage.TypeA, true))
	if err != nil || len(ms[0].Answers) != 60 {
		t.Fatalf("TCP client, upstream truncating: %v", err)
	}
	if up.tcpQueries.Load() != before+1 {
		t.Fatal("the truncated UDP answer was not retried over TCP")
	}
}

func TestUDPClientGetsAtMostItsSize(t *testing.T) {
	up, r, _ := setup(t, Policy{})
	// With EDNS (1232 bytes) the 60 records fit.
	m, raw, err := exchange(r.udp, newQuery(t, "big.test.", dnsmessage.TypeA, true), 3*time.Second)
	if err != nil || m.Truncated || len(m.Answers) != 60 || len(raw) > 1232 {
		t.Fatalf("EDNS client: %v, %d answers, %d bytes", err, len(m.Answers), len(raw))
	}
	// Without, they do not; an upstream that sends them all anyway does
	// not make the client get more than 512 bytes.
	up.ignoreSize.Store(true)
	m, raw, err = exchange(r.udp, newQuery(t, "big.test.", dnsmessage.TypeA, false), 3*time.Second)
	if err != nil || !m.Truncated || len(raw) > minUDPSize || m.Questions[0].Name.String() != "big.test." {
		t.Fatalf("plain client: %v, TC %v, %d bytes", err, m != nil && m.Truncated, len(raw))
	}
	if up.tcpQueries.Load() != 0 {
		t.Fatal("a UDP client's query went upstream over TCP")
	}
}

func TestMalformedQueries(t *testing.T) {
	const noAnswer = dnsmessage.RCode(0xffff)
	up, r, _ := setup(t, Policy{Deny: []string{"denied.test"}})
	valid := newQuery(t, "denied.test.", dnsmessage.TypeA, false)

	withHeader := func(id uint16, bits uint16, counts [4]uint16, rest []byte) []byte {
		b := []byte{byte(id >> 8), byte(id), byte(bits >> 8), byte(bits)}
		for _, c := range counts {
			b = append(b, byte(c>>8), byte(c))
		}
		return append(b, rest...)
	}
	question := valid[12:] // name, type, class of the valid query
	twoQuestions := withHeader(7, 0x0100, [4]uint16{2, 0, 0, 0}, append(slices.Clone(question), question...))
	chaos := slices.Clone(valid)
	chaos[len(chaos)-1] = 3 // class CH
	axfr := newQuery(t, "denied.test.", dnsmessage.TypeAXFR, false)
	badVers := newQuery(t, "other.test.", dnsmessage.TypeA, true)
	badVers[len(badVers)-5] = 1 // the OPT record's version byte (then DO and flags, and RDLENGTH)

	for _, tc := range []struct {
		name  string
		msg   []byte
		rcode dnsmessage.RCode // noAnswer: none at all
	}{
		{"empty", nil, noAnswer},
		{"shorter than a header", []byte{1, 2, 3, 4, 5}, noAnswer},
		{"a response", withHeader(7, 0x8100, [4]uint16{1, 0, 0, 0}, question), noAnswer},
		{"header and garbage", withHeader(7, 0x0100, [4]uint16{1, 0, 0, 0}, []byte("\xff\xfe garbage")), dnsmessage.RCodeFormatError},
		{"no question", withHeader(7, 0x0100, [4]uint16{}, nil), dnsmessage.RCodeFormatError},
		{"two questions", twoQuestions, dnsmessage.RCodeFormatError},
		{"more questions than bytes", withHeader(7, 0x0100, [4]uint16{65535, 0, 0, 0}, question), dnsmessage.RCodeFormatError},
		{"with answers", withHeader(7, 0x0100, [4]uint16{1, 1, 0, 0}, question), dnsmessage.RCodeFormatError},
		{"name pointer loop", withHeader(7, 0x0100, [4]uint16{1, 0, 0, 0}, []byte{0xc0, 12, 0, 1, 0, 1}), dnsmessage.RCodeFormatError},
		{"oversized", append(slices.Clone(valid), make([]byte, 5000)...), dnsmessage.RCodeFormatError},
		{"opcode STATUS", withHeader(7, 0x1100, [4]uint16{1, 0, 0, 0}, question), dnsmessage.RCodeNotImplemented},
		{"class CH", chaos, dnsmessage.RCodeRefused},
		{"zone transfer", axfr, dnsmessage.RCodeRefused},
		{"EDNS version 1", badVers, rcodeBadVers},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wait := 3 * time.Second
			if tc.rcode == noAnswer {
				wait = 300 * time.Millisecond
			}
			m, _, err := exchange(r.udp, tc.msg, wait)
			if tc.rcode == noAnswer {
				if !isTimeout(err) {
					t.Fatalf("answered (%v, %v); want no answer", m, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			rcode := m.RCode
			for _, rr := range m.Additionals {
				if rr.Header.Type == dnsmessage.TypeOPT {
					rcode = rr.Header.ExtendedRCode(rcode)
				}
			}
			if rcode != tc.rcode || !m.Response || len(m.Answers) != 0 {
				t.Fatalf("rcode %v (response %v, %d answers), want %v", rcode, m.Response, len(m.Answers), tc.rcode)
			}
			if wantID := uint16(tc.msg[0])<<8 | uint16(tc.msg[1]); m.ID != wantID {
				t.Fatalf("id %d, want %d", m.ID, wantID)
			}
		})
	}
	// The same over TCP: garbage gets FORMERR, and the connection serves on.
	ms, err := exchangeTCP(r.tcp, 3*time.Second, withHeader(9, 0x0100, [4]uint16{1, 0, 0, 0}, []byte{0xc0}), valid)
	if err != nil {
		t.Fatalf("TCP: %v", err)
	}
	rcodes := map[uint16]dnsmessage.RCode{ms[0].ID: ms[0].RCode, ms[1].ID: ms[1].RCode} // answered as each is ready
	if rcodes[9] != dnsmessage.RCodeFormatError || rcodes[0x4242] != dnsmessage.RCodeNameError {
		t.Fatalf("TCP: %v", rcodes)
	}
	// And the resolver still serves.
	if m := ask(t, r, "other.test.", dnsmessage.TypeA); m.RCode != dnsmessage.RCodeSuccess {
		t.Fatalf("after the garbage: %v", m.RCode)
	}
	if n := up.queries.Load(); n != 1 {
		t.Fatalf("the upstream got %d queries, want the one valid neutral query", n)
	}
}

func TestTCPConnectionsAreBounded(t *testing.T) {
	_, r, _ := setup(t, Policy{})
	// A length prefix over maxQuery ends the connection.
	c, err := net.Dial("tcp", r.tcp)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(3 * time.Second))
	c.Write([]byte{0xff, 0xff})
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes after an oversized length; want the connection closed", n)
	} else if isTimeout(err) {
		t.Fatal("the connection stayed open after an oversized length")
	}
	c.Close()

	// maxTCPConns idle connections take every slot; the next is closed.
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range maxTCPConns {
		c, err := net.Dial("tcp", r.tcp)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// Until all are accepted, a slot may still look free: ask on each.
	for _, c := range conns {
		c.SetDeadline(time.Now().Add(3 * time.Second))
		q := newQuery(t, "other.test.", dnsmessage.TypeA, false)
		c.Write(append([]byte{0, byte(len(q))}, q...))
		if _, err := readTCPMessage(c, maxTCPMessage); err != nil {
			t.Fatal(err)
		}
	}
	extra, err := net.Dial("tcp", r.tcp)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	extra.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := extra.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("connection %d was served (%v); want it closed", maxTCPConns+1, err)
	}
	// One closed frees its slot.
	conns[0].Close()
	deadline := time.Now().Add(3 * time.Second)
	for {
		ms, err := exchangeTCP(r.tcp, time.Second, newQuery(t, "other.test.", dnsmessage.TypeA, false))
		if err == nil && ms[0].RCode == dnsmessage.RCodeSuccess {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no slot after a connection closed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestFloodStaysWithinTheBound(t *testing.T) {
	up := startUpstream(t)
	up.delay.Store(int64(400 * time.Millisecond))
	r := startResolver(t, Config{Upstream: up.addr, Timeout: 3 * time.Second})
	goroutines := runtime.NumGoroutine()

	// One socket, many queries at once, as a guest flooding would.
	c, err := net.Dial("udp", r.udp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 4 * MaxInFlight
	q := newQuery(t, "other.test.", dnsmessage.TypeA, false)
	for i := range n {
		q[0], q[1] = byte(i>>8), byte(i)
		if _, err := c.Write(q); err != nil {
			t.Fatal(err)
		}
	}
	peak := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-time.After(20 * time.Millisecond):
				peak = max(peak, runtime.NumGoroutine()-goroutines)
			case <-done:
				return
			}
		}
	}()
	rcodes := map[dnsmessage.RCode]int{}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	for range n {
		k, err := c.Read(buf)
		if err != nil {
			break // the kernel may drop datagrams of a flood; what arrived counts
		}
		var m dnsmessage.Message
		if err := m.Unpack(buf[:k]); err != nil {
			t.Fatal(err)
		}
		rcodes[m.RCode]++
	}
	done <- struct{}{}
	<-done
	if got := up.maxInFlight.Load(); got > MaxInFlight {
		t.Fatalf("%d queries upstream at once, over the bound %d", got, MaxInFlight)
	}
	if rcodes[dnsmessage.RCodeSuccess] == 0 || rcodes[dnsmessage.RCodeServerFailure] == 0 {
		t.Fatalf("answers %v: want some resolved and the excess SERVFAIL", rcodes)
	}
	if rcodes[dnsmessage.RCodeSuccess] > MaxInFlight {
		t.Fatalf("%d resolved at once, over the bound %d", rcodes[dnsmessage.RCodeSuccess], MaxInFlight)
	}
	// The resolver's goroutines (a handler per query, each with its
	// upstream exchange's helpers) and the test upstream's (one per
	// query, at most MaxInFlight of them) stay bounded by the in-flight
	// count, not by the flood.
	if limit := 4*MaxInFlight + 20; peak > limit {
		t.Fatalf("%d goroutines more during the flood, over %d", peak, limit)
	}
	t.Logf("answers %v, upstream peak %d, goroutines +%d", rcodes, up.maxInFlight.Load(), peak)
	// After the flood, it serves again.
	up.delay.Store(0)
	if m := ask(t, r, "other.test.", dnsmessage.TypeA); m.RCode != dnsmessage.RCodeSuccess {
		t.Fatalf("after the flood: %v", m.RCode)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Upstream: "localhost:53"},
		{Upstream: "127.0.0.1"},
		{Upstream: "127.0.0.1:53", Policy: Policy{Allow: []string{"a..b"}}},
		{Upstream: "127.0.0.1:53", Policy: Policy{Deny: []string{"10.0.0.1"}}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

func TestServeEnds(t *testing.T) {
	up := startUpstream(t)
	r, err := New(Config{Upstream: up.addr})
	if err != nil {
		t.Fatal(err)
	}
	// ServeUDP returns nil when its PacketConn is closed.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	udpDone := make(chan error, 1)
	go func() { udpDone <- r.ServeUDP(t.Context(), pc) }()
	if m, _, err := exchange(pc.LocalAddr().String(), newQuery(t, "other.test.", dnsmessage.TypeA, false), 3*time.Second); err != nil || m.RCode != dnsmessage.RCodeSuccess {
		t.Fatalf("UDP: %v", err)
	}
	pc.Close()
	select {
	case err := <-udpDone:
		if err != nil {
			t.Fatalf("ServeUDP after Close: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("ServeUDP went on after its PacketConn was closed")
	}

	// ServeTCP returns nil when its context ends, closing the listener
	// and a connection that is still open, once the query that connection
	// has upstream is done.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tcpDone := make(chan error, 1)
	go func() { tcpDone <- r.ServeTCP(ctx, l) }()
	up.delay.Store(int64(5 * time.Second))
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q := newQuery(t, "other.test.", dnsmessage.TypeA, false)
	c.Write(append([]byte{0, byte(len(q))}, q...))
	for up.inFlight.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-tcpDone:
		if err != nil {
			t.Fatalf("ServeTCP after cancel: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("ServeTCP went on after its context ended")
	}
	c.SetDeadline(time.Now().Add(3 * time.Second))
	for {
		// The SERVFAIL may or may not be written before the connection closes.
		b, err := readTCPMessage(c, maxTCPMessage)
		if err != nil {
			if isTimeout(err) {
				t.Fatal("the connection is still open after ServeTCP returned")
			}
			break
		}
		var m dnsmessage.Message
		if err := m.Unpack(b); err != nil || m.RCode != dnsmessage.RCodeServerFailure {
			t.Fatalf("answer %v (%v), want SERVFAIL", m.RCode, err)
		}
	}
	if _, err := net.Dial("tcp", l.Addr().String()); err == nil {
		t.Fatal("the listener is still open")
	}
}

func TestIdleAndTricklingTCPClientsAreClosed(t *testing.T) {
	up := startUpstream(t)
	r, err := New(Config{Upstream: up.addr})
	if err != nil {
		t.Fatal(err)
	}
	r.tcpIdle = 300 * time.Millisecond
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go r.ServeTCP(t.Context(), l)

	q := newQuery(t, "other.test.", dnsmessage.TypeA, false)
	msg := append([]byte{0, byte(len(q))}, q...)
	for _, tc := range []struct {
		name  string
		write func(c net.Conn)
	}{
		{"idle", func(net.Conn) {}},
		{"after an answer", func(c net.Conn) { c.Write(msg) }},
		{"trickling", func(c net.Conn) {
			for _, b := range msg { // a byte every 50 ms: the whole query takes over a second
				if _, err := c.Write([]byte{b}); err != nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			go tc.write(c)
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			answers := 0
			for {
				if _, err := readTCPMessage(c, maxTCPMessage); err != nil {
					if isTimeout(err) {
						t.Fatal("still open after 5 s")
					}
					break
				}
				answers++
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Fatalf("closed after %v, the idle limit is %v", took, r.tcpIdle)
			}
			if want := map[string]int{"after an answer": 1}[tc.name]; answers != want {
				t.Fatalf("%d answers, want %d", answers, want)
			}
		})
	}
}
