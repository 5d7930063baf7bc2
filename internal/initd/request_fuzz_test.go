package initd

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// FuzzReadRequest feeds cairn-init's header decoder arbitrary bytes, as a
// stream opened by cairnd could carry. It reads no further than the
// header line; a request it accepts has what its op needs, within bounds
// (the shutdown grace does not overflow, the hostname fits), and encodes
// and decodes back to itself; a request it refuses gets an error whose
// reply still fits in one agent message, so cairnd reads why instead of a
// broken stream.
func FuzzReadRequest(f *testing.F) {
	for _, s := range []string{
		`{"op":"ping"}`,
		`{"op":"exec","exec":{"command":["sh","-c","echo hi"],"env":["A=1"],"dir":"/tmp","tty":true,"stdin":true,"rows":24,"cols":80}}`,
		`{"op":"exec"}`,
		`{"op":"attach","session":{"id":"0123456789abcdef0123456789abcdef","offset":42}}`,
		`{"op":"ack","session":{"id":"x","offset":-1}}`,
		`{"op":"logs","logs":{"service":"web","tail_bytes":1048576}}`,
		`{"op":"shutdown","grace_ms":9223372036854775807}`,
		`{"op":"hostname","hostname":"web-fork-1"}`,
		`{"op":"sync","exec":null,"logs":null}`,
		`{"op":"` + strings.Repeat("\x7f", 20000) + `"}`,
		`not json`,
	} {
		f.Add([]byte(s + "\n"))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		req, err := readRequest(r)
		if read := len(data) - r.Len(); read > api.MaxMessage {
			t.Fatalf("read %d bytes for a header", read)
		}
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			res := errorReply(err)
			if oe, ok := errors.AsType[*opError](err); ok && res.Code != oe.code {
				t.Fatalf("reply code %q, want %q", res.Code, oe.code)
			}
			var reply bytes.Buffer
			api.WriteMessage(&reply, res)
			if reply.Len() > api.MaxMessage {
				t.Fatalf("the reply to a refused request is %d bytes, over MaxMessage: cairnd could not read it", reply.Len())
			}
			return
		}
		if nl := bytes.IndexByte(data, '\n'); len(data)-r.Len() != nl+1 {
			t.Fatalf("read %d bytes, the header line is %d", len(data)-r.Len(), nl+1)
		}
		switch req.Op {
		case api.AgentOpExec:
			if req.Exec == nil {
				t.Fatal("exec accepted without an exec request")
			}
		case api.AgentOpAttach, api.AgentOpAck:
			if req.Session == nil {
				t.Fatalf("%s accepted without a session", req.Op)
			}
		case api.AgentOpLogs:
			if req.Logs == nil {
				t.Fatal("logs accepted without a logs request")
			}
		case api.AgentOpShutdown:
			if g := time.Duration(req.GraceMS) * time.Millisecond; g < 0 || g/time.Millisecond != time.Duration(req.GraceMS) {
				t.Fatalf("grace_ms %d accepted: overflows", req.GraceMS)
			}
		case api.AgentOpHostname:
			if len(req.Hostname) == 0 || len(req.Hostname) > maxHostname {
				t.Fatalf("hostname of %d bytes accepted", len(req.Hostname))
			}
		case api.AgentOpPing, api.AgentOpSync, api.AgentOpServices:
		default:
			t.Fatalf("unknown op %q accepted", req.Op)
		}
		var again bytes.Buffer
		if err := api.WriteMessage(&again, req); err != nil {
			t.Fatal(err)
		}
		// Compared as encoded: "env":[] and no env are the same request.
		back, err := readRequest(bytes.NewReader(again.Bytes()))
		var third bytes.Buffer
		api.WriteMessage(&third, back)
		if err != nil || !bytes.Equal(third.Bytes(), again.Bytes()) {
			t.Fatalf("round trip: %s (%v), want %s", third.Bytes(), err, again.Bytes())
		}
	})
}
