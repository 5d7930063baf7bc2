package dns

import (
	"errors"
	"fmt"

	"golang.org/x/net/dns/dnsmessage"
)

const (
	// maxQuery bounds a query read from the guest, over UDP and TCP alike:
	// a real one (one question, an OPT record) is well under 300 bytes.
	maxQuery = 4096
	// minUDPSize is what a UDP answer may hold for a client without EDNS
	// (RFC 1035); maxUDPSize is the most this resolver sends or asks for
	// over UDP, whatever a client advertises.
	minUDPSize = 512
	maxUDPSize = 4096

	rcodeBadVers = dnsmessage.RCode(16) // RFC 6891: an EDNS version we do not speak
	typeIXFR     = dnsmessage.Type(251)
)

// query is a guest's query that parseQuery accepted: exactly what is used
// from it, so that nothing else the guest sent goes further.
type query struct {
	id       uint16
	opCode   dnsmessage.OpCode
	rd       bool // recursion desired
	cd       bool // checking disabled (DNSSEC)
	ad       bool // the client understands the AD bit
	question dnsmessage.Question
	hasQ     bool // question is set (also on some refusals)
	edns     bool // the query had an OPT record: the reply has one too
	udpSize  int  // what the client can take over UDP, within [minUDPSize, maxUDPSize]
	do       bool // DNSSEC OK
}

// refusal is a query answered with an error code instead of forwarded.
type refusal struct {
	rcode  dnsmessage.RCode
	reason string
}

func (r *refusal) Error() string { return r.reason }

// errDrop marks bytes that get no answer at all: too short for a header
// (there is no ID to answer), or a response rather than a query (answering
// responses lets two resolvers bounce packets at each other forever).
var errDrop = errors.New("dropped")

func refuse(rcode dnsmessage.RCode, format string, args ...any) error {
	return &refusal{rcode: rcode, reason: fmt.Sprintf(format, args...)}
}

// parseQuery reads one query from a guest. The error is errDrop (no
// answer), or a *refusal whose rcode the answer carries; q then holds what
// the answer echoes (id and opcode, and the question when it was read).
func parseQuery(b []byte) (q query, err error) {
	var p dnsmessage.Parser
	h, err := p.Start(b)
	if err != nil {
		return q, errDrop
	}
	q.id, q.opCode = h.ID, h.OpCode
	q.rd, q.cd, q.ad = h.RecursionDesired, h.CheckingDisabled, h.AuthenticData
	q.udpSize = minUDPSize
	switch {
	case h.Response:
		return q, errDrop
	case len(b) > maxQuery:
		return q, refuse(dnsmessage.RCodeFormatError, "query of %d bytes, over %d", len(b), maxQuery)
	case h.OpCode != 0:
		return q, refuse(dnsmessage.RCodeNotImplemented, "opcode %d", h.OpCode)
	}
	question, err := p.Question()
	if errors.Is(err, dnsmessage.ErrSectionDone) {
		return q, refuse(dnsmessage.RCodeFormatError, "no question")
	} else if err != nil {
		return q, refuse(dnsmessage.RCodeFormatError, "question: %v", err)
	}
	if _, err := p.Question(); !errors.Is(err, dnsmessage.ErrSectionDone) {
		return q, refuse(dnsmessage.RCodeFormatError, "more than one question")
	}
	if err := p.SkipAnswer(); !errors.Is(err, dnsmessage.ErrSectionDone) {
		return q, refuse(dnsmessage.RCodeFormatError, "a query with answers")
	}
	if err := p.SkipAuthority(); !errors.Is(err, dnsmessage.ErrSectionDone) {
		return q, refuse(dnsmessage.RCodeFormatError, "a query with authority records")
	}
	var opt *dnsmessage.ResourceHeader
	for {
		rh, err := p.AdditionalHeader()
		if errors.Is(err, dnsmessage.ErrSectionDone) {
			break
		}
		switch {
		case err != nil:
			return q, refuse(dnsmessage.RCodeFormatError, "additional record: %v", err)
		case rh.Type != dnsmessage.TypeOPT:
			return q, refuse(dnsmessage.RCodeFormatError, "an additional record of type %d (only OPT is taken)", rh.Type)
		case opt != nil:
			return q, refuse(dnsmessage.RCodeFormatError, "two OPT records")
		case rh.Name.Length != 1 || rh.Name.Data[0] != '.':
			return q, refuse(dnsmessage.RCodeFormatError, "an OPT record not at the root")
		}
		if _, err := p.OPTResource(); err != nil {
			return q, refuse(dnsmessage.RCodeFormatError, "OPT record: %v", err)
		}
		opt = &rh
	}
	if opt != nil {
		q.edns = true
		q.do = opt.DNSSECAllowed()
		q.udpSize = min(max(int(opt.Class), minUDPSize), maxUDPSize)
	}
	// From here on a refusal can echo the question.
	q.question, q.hasQ = question, true
	if opt != nil && opt.TTL>>16&0xff != 0 {
		return q, refuse(rcodeBadVers, "EDNS version %d", opt.TTL>>16&0xff)
	}
	switch question.Type {
	case dnsmessage.TypeOPT:
		return q, refuse(dnsmessage.RCodeFormatError, "a question of type OPT")
	case dnsmessage.TypeAXFR, typeIXFR:
		return q, refuse(dnsmessage.RCodeRefused, "zone transfer")
	}
	if question.Class != dnsmessage.ClassINET {
		return q, refuse(dnsmessage.RCodeRefused, "class %d (only IN is served)", question.Class)
	}
	return q, nil
}

// upstreamQuery is q as sent upstream: a query this resolver builds from
// the fields parseQuery kept, with its own id. udpSize is the EDNS size it
// advertises, when q had EDNS.
func (q query) upstreamQuery(id uint16, udpSize int) ([]byte, error) {
	b := dnsmessage.NewBuilder(make([]byte, 0, 64+q.question.Name.Length), dnsmessage.Header{
		ID: id, RecursionDesired: q.rd, CheckingDisabled: q.cd, AuthenticData: q.ad,
	})
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q.question); err != nil {
		return nil, err
	}
	if q.edns {
		if err := b.StartAdditionals(); err != nil {
			return nil, err
		}
		var rh dnsmessage.ResourceHeader
		if err := rh.SetEDNS0(udpSize, dnsmessage.RCodeSuccess, q.do); err != nil {
			return nil, err
		}
		if err := b.OPTResource(rh, dnsmessage.OPTResource{}); err != nil {
			return nil, err
		}
	}
	return b.Finish()
}

// reply is this resolver's own answer to q: rcode, no records, the
// question when q has one, and an OPT record when the query had one.
// truncated sets TC (an answer too large for the client's UDP size).
func (q query) reply(rcode dnsmessage.RCode, truncated bool) []byte {
	b := dnsmessage.NewBuilder(make([]byte, 0, 64+q.question.Name.Length), dnsmessage.Header{
		ID: q.id, Response: true, OpCode: q.opCode, Truncated: truncated,
		RecursionDesired: q.rd, RecursionAvailable: true, CheckingDisabled: q.cd,
		RCode: rcode & 0xf,
	})
	out, err := q.buildReply(&b, rcode)
	if err != nil {
		// Only a question the parser took and the builder refuses gets
		// here: answer without it.
		q.hasQ = false
		b = dnsmessage.NewBuilder(make([]byte, 0, 64), dnsmessage.Header{
			ID: q.id, Response: true, OpCode: q.opCode, RecursionAvailable: true, RCode: rcode & 0xf,
		})
		out, _ = q.buildReply(&b, rcode)
	}
	return out
}

func (q query) buildReply(b *dnsmessage.Builder, rcode dnsmessage.RCode) ([]byte, error) {
	if q.hasQ {
		if err := b.StartQuestions(); err != nil {
			return nil, err
		}
		if err := b.Question(q.question); err != nil {
			return nil, err
		}
	}
	if q.edns {
		if err := b.StartAdditionals(); err != nil {
			return nil, err
		}
		var rh dnsmessage.ResourceHeader
		if err := rh.SetEDNS0(maxUDPSize, rcode, false); err != nil {
			return nil, err
		}
		if err := b.OPTResource(rh, dnsmessage.OPTResource{}); err != nil {
			return nil, err
		}
	}
	return b.Finish()
}
