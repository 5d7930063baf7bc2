package agentauth

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"testing"
)

func TestHandshakeRoundTrip(t *testing.T) {
	key, other := NewKey(), NewKey()
	for _, tc := range []struct {
		name    string
		keys    []Key
		verdict string
		want    int
	}{
		{"current key", []Key{key, other}, "", 0},
		{"pending key", []Key{other, key}, "", 1},
		{"wrong key", []Key{other}, ReasonBadProof, -1},
		{"no keys", nil, ReasonBadProof, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host, agent := net.Pipe()
			defer host.Close()
			done := make(chan error, 1)
			go func() { done <- Answer(agent, key) }()
			nonce := NewNonce()
			host.Write(ChallengeLine(nonce))
			line, err := ReadLine(host)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(line, []byte(key.String())) {
				t.Fatal("the proof line holds the key")
			}
			proof, err := ParseProof(line)
			if err != nil {
				t.Fatal(err)
			}
			got := Verify(tc.keys, nonce, proof)
			if got != tc.want {
				t.Errorf("Verify: %d, want %d", got, tc.want)
			}
			host.Write(VerdictLine(tc.verdict))
			err = <-done
			var re *RefusedError
			switch {
			case tc.verdict == "" && err != nil:
				t.Errorf("Answer: %v", err)
			case tc.verdict != "" && (!errors.As(err, &re) || re.Reason != tc.verdict):
				t.Errorf("Answer: %v, want refused %q", err, tc.verdict)
			}
		})
	}
}

// A proof is bound to its nonce: the proof of one nonce does not verify
// for another.
func TestProofIsPerNonce(t *testing.T) {
	key := NewKey()
	n1, n2 := NewNonce(), NewNonce()
	if Verify([]Key{key}, n2, Prove(key, n1)) != -1 {
		t.Fatal("a proof verified for another nonce")
	}
	if Prove(key, n1) == Prove(NewKey(), n1) {
		t.Fatal("two keys gave the same proof")
	}
}

func TestParsers(t *testing.T) {
	k := NewKey()
	if got, err := ParseKey([]byte(k.String() + "\n")); err != nil || got != k {
		t.Errorf("ParseKey: %v", err)
	}
	for _, bad := range []string{"", "00", strings.ToUpper(k.String()), k.String() + "0", "zz" + k.String()[2:], k.String() + "\n\n"} {
		if _, err := ParseKey([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseKey(%q): %v", bad, err)
		}
	}
	for _, bad := range []string{"", "cairn-agent-auth/2 challenge " + k.String(), "cairn-agent-auth/1 challenge", "cairn-agent-auth/1 challenge " + k.String() + " "} {
		if _, err := ParseChallenge([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseChallenge(%q): %v", bad, err)
		}
	}
	for _, bad := range []string{"", "proof", "proof " + k.String()[:10], "PROOF " + k.String()} {
		if _, err := ParseProof([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseProof(%q): %v", bad, err)
		}
	}
	for _, bad := range []string{"", "OK", "ok ", "refused\x1b[31m", "refused"} {
		if err := ParseVerdict([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseVerdict(%q): %v", bad, err)
		}
	}
	if got := VerdictLine("a\nb\x1b"); string(got) != "refused a?b?\n" {
		t.Errorf("VerdictLine: %q", got)
	}
	if _, err := ReadLine(strings.NewReader(strings.Repeat("x", MaxLine) + "\n")); !errors.Is(err, ErrMalformed) {
		t.Errorf("ReadLine of a long line: %v", err)
	}
	r := strings.NewReader("ok\nrest")
	if line, err := ReadLine(r); err != nil || string(line) != "ok" || r.Len() != 4 {
		t.Errorf("ReadLine read past the newline: %q, %v, %d left", line, err, r.Len())
	}
}

// FuzzDecode feeds what a peer may send to every parser: none panics, and
// what parses prints back to the same line.
func FuzzDecode(f *testing.F) {
	k := NewKey()
	n := NewNonce()
	for _, s := range [][]byte{
		ChallengeLine(n), ProofLine(Prove(k, n)), VerdictLine(""), VerdictLine(ReasonConnected),
		[]byte(k.String()), []byte("proof "), []byte("refused \xff"), {},
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		line := bytes.TrimSuffix(b, []byte("\n"))
		if n, err := ParseChallenge(line); err == nil && !bytes.Equal(ChallengeLine(n), append(line, '\n')) {
			t.Errorf("challenge %q does not round-trip", line)
		}
		if p, err := ParseProof(line); err == nil && !bytes.Equal(ProofLine(p), append(line, '\n')) {
			t.Errorf("proof %q does not round-trip", line)
		}
		if err := ParseVerdict(line); err == nil {
			if string(line) != "ok" {
				t.Errorf("verdict %q taken as ok", line)
			}
		} else if re, ok := err.(*RefusedError); ok && !bytes.Equal(VerdictLine(re.Reason), append(line, '\n')) && len(line) < MaxLine {
			t.Errorf("refusal %q does not round-trip", line)
		}
		if key, err := ParseKey(b); err == nil && key.String() != string(line) {
			t.Errorf("key %q does not round-trip", b)
		}
		if got, err := ReadLine(bytes.NewReader(b)); err == nil && (len(got) >= MaxLine || bytes.IndexByte(got, '\n') >= 0) {
			t.Errorf("ReadLine returned %q", got)
		}
	})
}
