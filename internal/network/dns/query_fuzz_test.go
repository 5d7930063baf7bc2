package dns

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// FuzzQuery feeds the guest-facing parser arbitrary bytes, as a sandbox
// can send its resolver. Bytes without a header, and responses, get no
// answer; anything else gets a reply that parses, carries the query's id,
// is a response and fits a plain UDP answer; a query accepted for
// forwarding yields an upstream query that holds exactly its one question
// and parses back to the same query; and the policy decides on any name
// without panicking.
func FuzzQuery(f *testing.F) {
	for _, seed := range [][]byte{
		newQuery(f, "api.example.com.", dnsmessage.TypeA, false),
		newQuery(f, "API.example.com.", dnsmessage.TypeAAAA, true),
		newQuery(f, ".", dnsmessage.TypeNS, true),
		newQuery(f, "x.test.", dnsmessage.TypeAXFR, false),
		{0x42, 0x42, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1},  // a name pointing at itself
		{0x42, 0x42, 0x01, 0x00, 0, 2, 0, 0, 0, 0, 0, 0, 1, 'a', 0, 0, 1, 0, 1}, // two questions, one there
		{0x42, 0x42, 0x81, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 1, 'a', 0, 0, 1, 0, 1}, // a response
		{1, 2, 3},
	} {
		f.Add(seed)
	}
	policy := compilePolicy(Policy{Allow: []string{"api.example.com"}, Deny: []string{"*.example.com"}})
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := parseQuery(b)
		if errors.Is(err, errDrop) {
			if len(b) >= 12 && b[2]&0x80 == 0 {
				t.Fatal("a query with a header was dropped")
			}
			return
		}
		var ref *refusal
		if err != nil && !errors.As(err, &ref) {
			t.Fatalf("an error that is neither a drop nor a refusal: %v", err)
		}
		rcode := dnsmessage.RCodeSuccess
		if ref != nil {
			rcode = ref.rcode
			if rcode == dnsmessage.RCodeSuccess {
				t.Fatal("a refusal with rcode 0")
			}
		}
		// The reply is well formed, whatever the query was.
		reply := q.reply(rcode, false)
		var m dnsmessage.Message
		if err := m.Unpack(reply); err != nil {
			t.Fatalf("the reply does not parse: %v", err)
		}
		if m.ID != uint16(b[0])<<8|uint16(b[1]) || !m.Response || len(m.Answers) != 0 || len(reply) > minUDPSize {
			t.Fatalf("reply %+v of %d bytes", m.Header, len(reply))
		}
		if rcode < 16 && m.RCode != rcode {
			t.Fatalf("reply rcode %v, want %v", m.RCode, rcode)
		}
		if ref != nil {
			return
		}
		// An accepted query: what goes upstream is that one question.
		if len(b) > maxQuery || q.question.Class != dnsmessage.ClassINET || !q.hasQ {
			t.Fatalf("accepted %d bytes, class %v", len(b), q.question.Class)
		}
		if len(m.Questions) != 1 || m.Questions[0] != q.question {
			t.Fatalf("reply questions %v, want the query's", m.Questions)
		}
		up, err := q.upstreamQuery(0x1234, maxUDPSize)
		if err != nil {
			t.Fatalf("no upstream query for an accepted one: %v", err)
		}
		back, err := parseQuery(up)
		if err != nil {
			t.Fatalf("the upstream query does not parse as a query: %v", err)
		}
		back.id, q.id = 0, 0
		if q.edns {
			if back.udpSize != maxUDPSize {
				t.Fatalf("upstream EDNS size %d, want the %d asked for", back.udpSize, maxUDPSize)
			}
			back.udpSize = q.udpSize
		}
		if back != q {
			t.Fatalf("upstream query %+v, want %+v", back, q)
		}
		policy.decide(q.question.Name.String())
		if strings.ContainsAny(printable(q.question.Name.String()), "\x00\n\r\x1b") {
			t.Fatal("a control byte reached a log")
		}
	})
}

// FuzzUpstreamAnswer feeds arbitrary bytes as the upstream's answer to
// an allowed name's query: it is taken only with the query's id and
// question; an address reported for it is one of its A or AAAA records,
// with a TTL within [MinTTL, MaxTTL]; and what is passed on to the guest
// packs and parses again.
func FuzzUpstreamAnswer(f *testing.F) {
	question := dnsmessage.Question{Name: dnsmessage.MustNewName("www.example.com."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}
	u := &testUpstream{closed: make(chan struct{})}
	for _, name := range []string{"www.example.com.", "api.example.com.", "extra.test.", "loop.test."} {
		q := newQuery(f, name, dnsmessage.TypeA, true)
		q[0], q[1] = 0x12, 0x34
		f.Add(u.answer(q, false))
	}
	f.Add([]byte{0x12, 0x34, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := answerTo(b, 0x1234, question)
		if err != nil {
			return
		}
		if m.ID != 0x1234 || len(m.Questions) != 1 || !m.Response {
			t.Fatalf("taken: %+v", m.Header)
		}
		var records []netip.Addr
		for _, rr := range m.Answers {
			switch body := rr.Body.(type) {
			case *dnsmessage.AResource:
				records = append(records, netip.AddrFrom4(body.A))
			case *dnsmessage.AAAAResource:
				records = append(records, netip.AddrFrom16(body.AAAA).Unmap())
			}
		}
		for _, a := range chainAddrs(m, question.Name) {
			if !slices.Contains(records, a.addr) {
				t.Fatalf("reported %v, which is not in the answer", a.addr)
			}
			if a.ttl < MinTTL || a.ttl > MaxTTL {
				t.Fatalf("reported TTL %v", a.ttl)
			}
		}
		out, err := m.Pack()
		if err != nil {
			return // answered SERVFAIL
		}
		var again dnsmessage.Message
		if err := again.Unpack(out); err != nil {
			t.Fatalf("the repacked answer does not parse: %v", err)
		}
	})
}
