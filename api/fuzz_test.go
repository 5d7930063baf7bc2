package api

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"testing"
)

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// FuzzReadFrame reads exec frames from arbitrary bytes, as cairnd and
// cairn-init read them from a client they do not trust. Each frame read
// is exactly the bytes it came from (WriteFrame writes them back the
// same), its payload is within MaxFramePayload, a header announcing more
// is refused before anything is allocated for it, and io.EOF comes only at
// a frame boundary: a torn frame is an error that says so.
func FuzzReadFrame(f *testing.F) {
	var seed bytes.Buffer
	WriteFrame(&seed, FrameStdin, []byte("echo hi\n"))
	WriteFrame(&seed, FrameResize, []byte(`{"rows":24,"cols":80}`))
	WriteFrame(&seed, FrameSignal, []byte{15})
	WriteFrame(&seed, FrameStdinClose, nil)
	WriteFrame(&seed, FrameExit, []byte(`{"code":0}`))
	f.Add(seed.Bytes())
	f.Add([]byte{byte(FrameStdout), 0, 0, 0, 5, 'a'})             // torn payload
	f.Add([]byte{byte(FrameStdout), 0, 0})                        // torn header
	f.Add([]byte{byte(FrameStdout), 0xff, 0xff, 0xff, 0xff, 'x'}) // 4 GiB announced
	f.Add([]byte{byte(FrameStdout), 0, 0x10, 0, 1})               // MaxFramePayload+1
	f.Fuzz(func(t *testing.T, data []byte) {
		cr := &countingReader{r: bytes.NewReader(data)}
		off := 0
		for {
			typ, payload, err := ReadFrame(cr)
			if err != nil {
				rest := data[off:]
				switch {
				case errors.Is(err, io.EOF):
					if len(rest) != 0 {
						t.Fatalf("EOF with %d bytes left", len(rest))
					}
				case errors.Is(err, ErrFrameTooLarge):
					if len(rest) < 5 || binary.BigEndian.Uint32(rest[1:5]) <= MaxFramePayload {
						t.Fatalf("too large, but header %x", rest[:min(5, len(rest))])
					}
					if cr.n-off != 5 {
						t.Fatalf("read %d bytes of an oversized frame, want its 5-byte header only", cr.n-off)
					}
				case errors.Is(err, io.ErrUnexpectedEOF):
					if len(rest) >= 5 && int(binary.BigEndian.Uint32(rest[1:5])) <= len(rest)-5 {
						t.Fatalf("torn frame reported, but it is whole: %x", rest)
					}
				default:
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if len(payload) > MaxFramePayload {
				t.Fatalf("payload of %d bytes", len(payload))
			}
			var again bytes.Buffer
			if err := WriteFrame(&again, typ, payload); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again.Bytes(), data[off:cr.n]) {
				t.Fatalf("frame %d %q is not the bytes %x it was read from", typ, payload, data[off:cr.n])
			}
			off = cr.n
		}
	})
}

// FuzzReadMessage reads an agent header or reply line from arbitrary
// bytes. It never reads past the newline (exec frames follow it), never
// takes a line longer than the limit, and what it decodes encodes and
// decodes again to the same value.
func FuzzReadMessage(f *testing.F) {
	f.Add([]byte(`{"op":"exec","exec":{"command":["sh","-c","ls"],"tty":true,"rows":24,"cols":80}}`+"\n\x01\x00\x00\x00\x02hi"), 0)
	f.Add([]byte(`{"op":"logs","logs":{"service":"web","tail_bytes":100}}`+"\n"), 0)
	f.Add([]byte(`{"op":"attach","session":{"id":"00","offset":5}}`+"\n"), 0)
	f.Add([]byte(`{"op":"shutdown","grace_ms":10000}`+"\n"), 0)
	f.Add([]byte(`{"op":"ping"}`), 0)              // no newline
	f.Add([]byte(`{"op":"ping"} {"x":1}`+"\n"), 0) // trailing data in the line
	f.Add([]byte("\n"), 0)
	f.Add(bytes.Repeat([]byte("a"), 300), 100)
	f.Fuzz(func(t *testing.T, data []byte, limit int) {
		if limit <= 0 || limit > MaxMessage {
			limit = MaxMessage
		}
		cr := &countingReader{r: bytes.NewReader(data)}
		var req AgentRequest
		err := ReadMessageMax(cr, &req, limit)
		nl := bytes.IndexByte(data, '\n')
		switch {
		case nl >= 0 && nl+1 > limit:
			if !errors.Is(err, ErrMessageTooLarge) {
				t.Fatalf("line of %d bytes over the limit %d: %v", nl+1, limit, err)
			}
		case nl < 0 && len(data) >= limit:
			if !errors.Is(err, ErrMessageTooLarge) {
				t.Fatalf("%d bytes without a newline, limit %d: %v", len(data), limit, err)
			}
		case nl < 0:
			if err == nil {
				t.Fatal("a line without its newline was accepted")
			}
		default:
			if cr.n != nl+1 {
				t.Fatalf("read %d bytes, the line is %d", cr.n, nl+1)
			}
			wantErr := json.Unmarshal(data[:nl], new(AgentRequest)) != nil
			if (err != nil) != wantErr {
				t.Fatalf("error %v, but json says %v", err, wantErr)
			}
		}
		if cr.n > limit {
			t.Fatalf("read %d bytes, limit %d", cr.n, limit)
		}
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		var again bytes.Buffer
		if err := WriteMessage(&again, req); err != nil {
			t.Fatal(err)
		}
		// Compared as encoded: "env":[] and no env are the same request.
		var back AgentRequest
		err = ReadMessage(bytes.NewReader(again.Bytes()), &back)
		var third bytes.Buffer
		WriteMessage(&third, back)
		if err != nil || !bytes.Equal(third.Bytes(), again.Bytes()) {
			t.Fatalf("round trip: %s (%v), want %s", third.Bytes(), err, again.Bytes())
		}
	})
}
