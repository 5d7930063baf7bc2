// Package agentauth is how cairn-init proves to cairnd that it is the
// sandbox's agent: a secret key per boot, and a challenge-response
// handshake on each connection before anything else is sent.
//
// cairnd makes a fresh random Key for every boot and gives it to cairn-init
// on its standard input, which cairn-init then closes. On each connection
// cairnd sends a random Nonce; cairn-init answers with the HMAC-SHA256 of
// the nonce under the key (never the key itself); cairnd answers ok or
// refuses and closes. The lines are plain text, at most MaxLine bytes,
// read one byte at a time so that nothing after them (the multiplexed
// connection) is consumed. The wire format is in docs/exec-protocol.md.
//
// The parsers (ParseKey, ParseChallenge, ParseProof, ParseVerdict) take
// bytes from the other end of a socket, and are written to be fuzzed.
package agentauth

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// Version names the handshake; it starts the challenge line and is part
// of what the proof covers.
const Version = "cairn-agent-auth/1"

// MaxLine bounds one handshake line, newline included.
const MaxLine = 256

// Key is the secret cairn-init holds for one boot (or one copy resumed
// from a memory image, once re-keyed).
type Key [32]byte

// Nonce is the random challenge of one connection.
type Nonce [32]byte

// Proof is cairn-init's answer to a Nonce.
type Proof [32]byte

// NewKey returns a fresh random key.
func NewKey() Key {
	var k Key
	_, _ = rand.Read(k[:]) // never fails on Linux
	return k
}

// NewNonce returns a fresh random nonce.
func NewNonce() Nonce {
	var n Nonce
	_, _ = rand.Read(n[:])
	return n
}

// String is the key as 64 lower-case hex digits: how it travels on
// cairn-init's standard input and in key files.
func (k Key) String() string { return hex.EncodeToString(k[:]) }

// ErrMalformed is wrapped by every parse error.
var ErrMalformed = errors.New("malformed agent handshake")

// ParseKey reads a key written by Key.String, with or without a trailing
// newline.
func ParseKey(b []byte) (Key, error) {
	var k Key
	if err := parseHex(bytes.TrimSuffix(b, []byte("\n")), k[:]); err != nil {
		return Key{}, fmt.Errorf("agent key: %w", err)
	}
	return k, nil
}

// Prove computes the proof of key for nonce: HMAC-SHA256 keyed by key over
// Version, a NUL byte and the nonce.
func Prove(key Key, nonce Nonce) Proof {
	mac := hmac.New(sha256.New, key[:])
	mac.Write([]byte(Version))
	mac.Write([]byte{0})
	mac.Write(nonce[:])
	var p Proof
	copy(p[:], mac.Sum(nil))
	return p
}

// Verify returns the index of the key in keys that proof was made with
// for nonce, or -1 if none. It compares in constant time.
func Verify(keys []Key, nonce Nonce, proof Proof) int {
	found := -1
	for i, k := range keys {
		want := Prove(k, nonce)
		if hmac.Equal(want[:], proof[:]) && found < 0 {
			found = i
		}
	}
	return found
}

// ChallengeLine is cairnd's first line: "cairn-agent-auth/1 challenge
// <64 hex>\n".
func ChallengeLine(n Nonce) []byte {
	return []byte(Version + " challenge " + hex.EncodeToString(n[:]) + "\n")
}

// ParseChallenge reads a challenge line (without its newline).
func ParseChallenge(line []byte) (Nonce, error) {
	var n Nonce
	rest, ok := bytes.CutPrefix(line, []byte(Version+" challenge "))
	if !ok {
		return Nonce{}, fmt.Errorf("%w: not a %s challenge", ErrMalformed, Version)
	}
	if err := parseHex(rest, n[:]); err != nil {
		return Nonce{}, fmt.Errorf("challenge: %w", err)
	}
	return n, nil
}

// ProofLine is cairn-init's answer: "proof <64 hex>\n".
func ProofLine(p Proof) []byte {
	return []byte("proof " + hex.EncodeToString(p[:]) + "\n")
}

// ParseProof reads a proof line (without its newline).
func ParseProof(line []byte) (Proof, error) {
	var p Proof
	rest, ok := bytes.CutPrefix(line, []byte("proof "))
	if !ok {
		return Proof{}, fmt.Errorf("%w: not a proof", ErrMalformed)
	}
	if err := parseHex(rest, p[:]); err != nil {
		return Proof{}, fmt.Errorf("proof: %w", err)
	}
	return p, nil
}

// RefusedError is cairnd's refusal of a connection, with its reason.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return "cairnd refused the agent: " + e.Reason }

// Reasons cairnd gives for a refusal.
const (
	ReasonBadProof  = "bad proof"
	ReasonConnected = "another agent is connected"
)

// VerdictLine is cairnd's last line: "ok\n", or "refused <reason>\n" for a
// non-empty reason (printable ASCII; anything else is replaced by '?').
func VerdictLine(reason string) []byte {
	if reason == "" {
		return []byte("ok\n")
	}
	b := []byte("refused " + reason)
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			b[i] = '?'
		}
	}
	if len(b) > MaxLine-1 {
		b = b[:MaxLine-1]
	}
	return append(b, '\n')
}

// ParseVerdict reads a verdict line (without its newline): nil for ok, a
// *RefusedError for a refusal.
func ParseVerdict(line []byte) error {
	if string(line) == "ok" {
		return nil
	}
	reason, ok := bytes.CutPrefix(line, []byte("refused "))
	if !ok || len(reason) == 0 {
		return fmt.Errorf("%w: not a verdict", ErrMalformed)
	}
	for _, c := range reason {
		if c < 0x20 || c > 0x7e {
			return fmt.Errorf("%w: unprintable refusal reason", ErrMalformed)
		}
	}
	return &RefusedError{Reason: string(reason)}
}

// ReadLine reads one line of at most MaxLine bytes, newline included, and
// returns it without the newline. It reads one byte at a time: no byte
// after the newline is consumed.
func ReadLine(r io.Reader) ([]byte, error) {
	line := make([]byte, 0, 128)
	var c [1]byte
	for {
		if _, err := io.ReadFull(r, c[:]); err != nil {
			if len(line) > 0 && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("read agent handshake: %w", err)
		}
		if c[0] == '\n' {
			return line, nil
		}
		if len(line) >= MaxLine-1 {
			return nil, fmt.Errorf("%w: line longer than %d bytes", ErrMalformed, MaxLine)
		}
		line = append(line, c[0])
	}
}

// Answer is cairn-init's side of the handshake on a new connection rw:
// it reads the challenge, sends the proof made with key, and reads the
// verdict. It returns nil once cairnd accepted the connection, a
// *RefusedError if it refused it. The caller bounds it with a deadline.
func Answer(rw io.ReadWriter, key Key) error {
	line, err := ReadLine(rw)
	if err != nil {
		return err
	}
	nonce, err := ParseChallenge(line)
	if err != nil {
		return err
	}
	if _, err := rw.Write(ProofLine(Prove(key, nonce))); err != nil {
		return fmt.Errorf("send agent proof: %w", err)
	}
	if line, err = ReadLine(rw); err != nil {
		return err
	}
	return ParseVerdict(line)
}

// parseHex decodes exactly len(dst) bytes of lower-case hex from src.
func parseHex(src, dst []byte) error {
	if len(src) != 2*len(dst) {
		return fmt.Errorf("%w: want %d hex digits, got %d bytes", ErrMalformed, 2*len(dst), len(src))
	}
	for _, c := range src {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return fmt.Errorf("%w: not lower-case hex", ErrMalformed)
		}
	}
	_, err := hex.Decode(dst, src)
	return err
}
