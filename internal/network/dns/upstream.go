package dns

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// maxTCPMessage is the most a DNS message over TCP can hold (its 2-byte
// length prefix).
const maxTCPMessage = 65535

// exchangeUDP sends q upstream over UDP from a socket of its own (a fresh
// source port, connected: only the upstream's address can answer) and
// waits until ctx ends for an answer with the query's id and question.
// Anything else that arrives is ignored, so that a stray or spoofed
// datagram cannot answer for the upstream. size is the EDNS size it
// advertises (when q has EDNS) and the most it reads.
func (r *Resolver) exchangeUDP(ctx context.Context, q query, size int) (*dnsmessage.Message, error) {
	id := uint16(rand.Uint32())
	msg, err := q.upstreamQuery(id, size)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp", r.upstream.String())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	// After the deadline is set, so that a cancel always wins.
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := c.Write(msg); err != nil {
		return nil, err
	}
	buf := make([]byte, maxUDPSize)
	for {
		n, err := c.Read(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		m, err := answerTo(buf[:n], id, q.question)
		if err == nil {
			return m, nil
		}
		r.log.Debug("dns: ignored an upstream datagram", "err", err)
	}
}

// exchangeTCP sends q upstream over one TCP connection of its own.
func (r *Resolver) exchangeTCP(ctx context.Context, q query) (*dnsmessage.Message, error) {
	id := uint16(rand.Uint32())
	msg, err := q.upstreamQuery(id, maxUDPSize)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", r.upstream.String())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	// After the deadline is set, so that a cancel always wins.
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := c.Write(binary.BigEndian.AppendUint16(nil, uint16(len(msg)))); err != nil {
		return nil, err
	}
	if _, err := c.Write(msg); err != nil {
		return nil, err
	}
	answer, err := readTCPMessage(c, maxTCPMessage)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return answerTo(answer, id, q.question)
}

// answerTo parses b as the upstream's answer to the query with id and
// question: a response, opcode QUERY, that same id and exactly that
// question (names compared case-insensitively), and records dnsmessage
// can read to the end.
func answerTo(b []byte, id uint16, question dnsmessage.Question) (*dnsmessage.Message, error) {
	var p dnsmessage.Parser
	h, err := p.Start(b)
	switch {
	case err != nil:
		return nil, err
	case !h.Response:
		return nil, errors.New("not a response")
	case h.ID != id:
		return nil, fmt.Errorf("id %d, the query's is %d", h.ID, id)
	case h.OpCode != 0:
		return nil, fmt.Errorf("opcode %d", h.OpCode)
	}
	qs, err := p.AllQuestions()
	if err != nil {
		return nil, err
	}
	if len(qs) != 1 || qs[0].Type != question.Type || qs[0].Class != question.Class ||
		lowerASCII(qs[0].Name.String()) != lowerASCII(question.Name.String()) {
		return nil, errors.New("the answer is not to the question asked")
	}
	m := new(dnsmessage.Message)
	if err := m.Unpack(b); err != nil {
		return nil, err
	}
	return m, nil
}

// readTCPMessage reads one length-prefixed DNS message of at most limit
// bytes; a longer one is an error (nothing of it is read beyond the prefix).
func readTCPMessage(r io.Reader, limit int) ([]byte, error) {
	var prefix [2]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(prefix[:]))
	if n > limit {
		return nil, fmt.Errorf("a message of %d bytes, over %d", n, limit)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return b, nil
}
