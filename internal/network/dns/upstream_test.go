package dns

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// testUpstream is a small authoritative-and-recursive-looking DNS server
// on 127.0.0.1 (UDP and TCP on one port) that the resolver under test
// forwards to. It answers from zone, follows CNAMEs inside it as a
// recursive resolver would, and can be made slow, truncating or wrong.
type testUpstream struct {
	addr string

	delay       atomic.Int64 // time.Duration before each answer
	wrongID     atomic.Bool  // answer with the query's id + 1
	truncateUDP atomic.Bool  // every UDP answer: TC and no records
	ignoreSize  atomic.Bool  // UDP answers of any size, whatever the query said

	queries     atomic.Int64 // queries received, UDP and TCP
	tcpQueries  atomic.Int64
	inFlight    atomic.Int64
	maxInFlight atomic.Int64

	mu    sync.Mutex
	names []string // question names received, in order

	closed chan struct{} // closed at the test's end: a delay ends early
}

type testRecord struct {
	typ   dnsmessage.Type
	ttl   uint32
	value string // an address, or a CNAME's target
}

// zone is what testUpstream knows. Names are lower case, with the dot.
var zone = map[string][]testRecord{
	"api.example.com.": {{dnsmessage.TypeA, 300, "192.0.2.10"}, {dnsmessage.TypeAAAA, 300, "2001:db8::10"}},
	"web.example.com.": {{dnsmessage.TypeA, 300, "192.0.2.11"}},
	"www.example.com.": {{dnsmessage.TypeCNAME, 300, "edge.cdn.test."}},
	"edge.cdn.test.":   {{dnsmessage.TypeCNAME, 300, "edge2.cdn.test."}},
	"edge2.cdn.test.":  {{dnsmessage.TypeA, 300, "192.0.2.20"}},
	"other.test.":      {{dnsmessage.TypeA, 300, "192.0.2.30"}},
	"zero.test.":       {{dnsmessage.TypeA, 0, "192.0.2.31"}},
	"week.test.":       {{dnsmessage.TypeA, 7 * 24 * 3600, "192.0.2.32"}},
	"loop.test.":       {{dnsmessage.TypeCNAME, 300, "loop2.test."}},
	"loop2.test.":      {{dnsmessage.TypeCNAME, 300, "loop.test."}},
	"big.test.":        bigRecords(),
	// extra.test's answer carries an address of another name as well,
	// which must not count as extra.test's.
	"extra.test.": {{dnsmessage.TypeA, 300, "192.0.2.40"}},
}

// strayName is the owner of the record testUpstream adds to extra.test's answer.
const strayName = "stray.test."

func bigRecords() []testRecord {
	var rs []testRecord
	for i := 1; i <= 60; i++ { // 60 × 16 bytes: over 512, under 4096
		rs = append(rs, testRecord{dnsmessage.TypeA, 300, netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}).String()})
	}
	return rs
}

func startUpstream(t *testing.T) *testUpstream {
	t.Helper()
	var (
		pc *net.UDPConn
		l  net.Listener
	)
	for range 20 { // a UDP port whose TCP twin is free too
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		if l, err = net.Listen("tcp", c.LocalAddr().String()); err == nil {
			pc = c
			break
		}
		c.Close()
	}
	if pc == nil {
		t.Fatal("no port free for UDP and TCP at once")
	}
	u := &testUpstream{addr: pc.LocalAddr().String(), closed: make(chan struct{})}
	var wg sync.WaitGroup
	t.Cleanup(func() { close(u.closed); pc.Close(); l.Close(); wg.Wait() })
	wg.Go(func() {
		buf := make([]byte, 65535)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			msg := append([]byte(nil), buf[:n]...)
			wg.Go(func() {
				if out := u.answer(msg, true); out != nil {
					pc.WriteTo(out, from)
				}
			})
		}
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				msg, err := readTCPMessage(c, maxTCPMessage)
				if err != nil {
					return
				}
				u.tcpQueries.Add(1)
				if out := u.answer(msg, false); out != nil {
					c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(out))), out...))
				}
			})
		}
	})
	return u
}

func (u *testUpstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.names...)
}

func (u *testUpstream) answer(msg []byte, overUDP bool) []byte {
	u.queries.Add(1)
	n := u.inFlight.Add(1)
	defer u.inFlight.Add(-1)
	for {
		m := u.maxInFlight.Load()
		if n <= m || u.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	var q dnsmessage.Message
	if err := q.Unpack(msg); err != nil || len(q.Questions) != 1 {
		return nil
	}
	question := q.Questions[0]
	u.mu.Lock()
	u.names = append(u.names, question.Name.String())
	u.mu.Unlock()
	select {
	case <-time.After(time.Duration(u.delay.Load())):
	case <-u.closed:
		return nil
	}

	resp := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: q.ID, Response: true, RecursionDesired: q.RecursionDesired, RecursionAvailable: true},
		Questions: q.Questions,
	}
	if u.wrongID.Load() {
		resp.ID++
	}
	name := strings.ToLower(question.Name.String())
	if _, ok := zone[name]; !ok {
		resp.RCode = dnsmessage.RCodeNameError
	}
	for hops := 0; hops < 8; hops++ {
		next := ""
		for _, rec := range zone[name] {
			h := dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName(name), Class: dnsmessage.ClassINET, TTL: rec.ttl}
			switch {
			case rec.typ == dnsmessage.TypeCNAME:
				resp.Answers = append(resp.Answers, dnsmessage.Resource{Header: h, Body: &dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName(rec.value)}})
				next = rec.value
			case rec.typ != question.Type:
			case rec.typ == dnsmessage.TypeA:
				resp.Answers = append(resp.Answers, dnsmessage.Resource{Header: h, Body: &dnsmessage.AResource{A: netip.MustParseAddr(rec.value).As4()}})
			case rec.typ == dnsmessage.TypeAAAA:
				resp.Answers = append(resp.Answers, dnsmessage.Resource{Header: h, Body: &dnsmessage.AAAAResource{AAAA: netip.MustParseAddr(rec.value).As16()}})
			}
		}
		if next == "" {
			break
		}
		name = next
	}
	if name == "extra.test." && question.Type == dnsmessage.TypeA {
		resp.Answers = append(resp.Answers, dnsmessage.Resource{
			Header: dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName(strayName), Class: dnsmessage.ClassINET, TTL: 300},
			Body:   &dnsmessage.AResource{A: [4]byte{198, 51, 100, 200}},
		})
	}
	size := minUDPSize
	for _, rr := range q.Additionals {
		if rr.Header.Type == dnsmessage.TypeOPT {
			size = max(size, int(rr.Header.Class))
			var opt dnsmessage.ResourceHeader
			opt.SetEDNS0(maxUDPSize, dnsmessage.RCodeSuccess, false)
			resp.Additionals = append(resp.Additionals, dnsmessage.Resource{Header: opt, Body: &dnsmessage.OPTResource{}})
		}
	}
	out, err := resp.Pack()
	if err != nil {
		panic(err)
	}
	if overUDP && (u.truncateUDP.Load() || len(out) > size && !u.ignoreSize.Load()) {
		resp.Truncated, resp.Answers = true, nil
		out, _ = resp.Pack()
	}
	return out
}

// --- the client side of the tests ---

// newQuery is a query for name and typ with id 0x4242 and RD.
func newQuery(t testing.TB, name string, typ dnsmessage.Type, edns bool) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 0x4242, RecursionDesired: true})
	b.StartQuestions()
	if err := b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}); err != nil {
		t.Fatal(err)
	}
	if edns {
		b.StartAdditionals()
		var rh dnsmessage.ResourceHeader
		rh.SetEDNS0(1232, dnsmessage.RCodeSuccess, false)
		b.OPTResource(rh, dnsmessage.OPTResource{})
	}
	out, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// exchange sends msg to the resolver over UDP and returns its answer, or
// an error when none came within wait.
func exchange(addr string, msg []byte, wait time.Duration) (*dnsmessage.Message, []byte, error) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write(msg); err != nil {
		return nil, nil, err
	}
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if err != nil {
		return nil, nil, err
	}
	var m dnsmessage.Message
	if err := m.Unpack(buf[:n]); err != nil {
		return nil, buf[:n], err
	}
	return &m, buf[:n], nil
}

// exchangeTCP sends msgs on one TCP connection and reads as many answers.
func exchangeTCP(addr string, wait time.Duration, msgs ...[]byte) ([]*dnsmessage.Message, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(wait))
	for _, msg := range msgs {
		if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(msg))), msg...)); err != nil {
			return nil, err
		}
	}
	var out []*dnsmessage.Message
	for range msgs {
		b, err := readTCPMessage(c, maxTCPMessage)
		if err != nil {
			return out, err
		}
		var m dnsmessage.Message
		if err := m.Unpack(b); err != nil {
			return out, err
		}
		out = append(out, &m)
	}
	return out, nil
}

// testResolver is a Resolver serving on 127.0.0.1, UDP and TCP.
type testResolver struct {
	*Resolver
	udp, tcp string
}

func startResolver(t *testing.T, cfg Config) *testResolver {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	go func() { errs <- r.ServeUDP(ctx, pc) }()
	go func() { errs <- r.ServeTCP(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			select {
			case err := <-errs:
				if err != nil {
					t.Errorf("serve: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("ServeUDP/ServeTCP did not return after their context ended")
				return
			}
		}
		pc.Close()
	})
	return &testResolver{Resolver: r, udp: pc.LocalAddr().String(), tcp: l.Addr().String()}
}

// answerAddrs is the A and AAAA addresses of m's answer section.
func answerAddrs(m *dnsmessage.Message) []string {
	var out []string
	for _, rr := range m.Answers {
		switch b := rr.Body.(type) {
		case *dnsmessage.AResource:
			out = append(out, netip.AddrFrom4(b.A).String())
		case *dnsmessage.AAAAResource:
			out = append(out, netip.AddrFrom16(b.AAAA).String())
		}
	}
	return out
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
