package agent

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/agentauth"
)

// Limits of the handshake: a flood of connections that do not prove
// themselves costs at most maxHandshakes goroutines and sockets, each for
// at most handshakeTimeout.
const (
	handshakeTimeout = 3 * time.Second
	maxHandshakes    = 8
	// rekeyTimeout bounds the re-key of a newly admitted connection.
	rekeyTimeout = 3 * time.Second
)

// admit runs the handshake on a new connection and makes it the Host's
// connection if cairn-init proves itself (see docs/exec-protocol.md,
// "Connection"): cairnd sends a nonce, the peer answers with the proof of
// one of the keys of the key file. A peer without a valid proof is
// refused; so is a second one while the current connection still answers
// a ping (only a copy of cairn-init's memory can hold its key). An
// admitted connection whose key must change (it came from a memory
// image, or a re-key was left unfinished) is re-keyed before it is used.
func (h *Host) admit(conn net.Conn) {
	done := false
	defer func() {
		h.mu.Lock()
		delete(h.pending, conn)
		h.mu.Unlock()
		if !done {
			conn.Close()
		}
	}()
	_ = conn.SetDeadline(time.Now().Add(handshakeTimeout))
	nonce := agentauth.NewNonce()
	if _, err := conn.Write(agentauth.ChallengeLine(nonce)); err != nil {
		return
	}
	line, err := agentauth.ReadLine(conn)
	if err != nil {
		h.refusals.note("no proof: " + err.Error())
		return
	}
	proof, err := agentauth.ParseProof(line)
	h.keysMu.Lock()
	keys := h.ring.accepted()
	h.keysMu.Unlock()
	used := -1
	if err == nil {
		used = agentauth.Verify(keys, nonce, proof)
	}
	if used < 0 {
		conn.Write(agentauth.VerdictLine(agentauth.ReasonBadProof))
		h.refusals.note(agentauth.ReasonBadProof)
		return
	}

	h.admitMu.Lock()
	defer h.admitMu.Unlock()
	if h.currentAnswers() {
		conn.Write(agentauth.VerdictLine(agentauth.ReasonConnected))
		h.log.Warn("agent: refused a connection with a valid proof while the connected agent answers (a copy of its memory?)")
		return
	}
	if _, err := conn.Write(agentauth.VerdictLine("")); err != nil {
		return
	}
	_ = conn.SetDeadline(time.Time{})
	sess, err := yamux.Client(conn, yamuxConfig())
	if err != nil { // only for an invalid config
		return
	}
	done = true // sess owns conn
	if err := h.settleKeys(sess, keys[used]); err != nil {
		h.log.Warn("agent: re-key failed; closing the connection (the agent dials again)", "err", err)
		sess.Close()
		return
	}
	h.install(sess)
}

// currentAnswers reports whether the Host's connection answers a ping.
func (h *Host) currentAnswers() bool {
	h.mu.Lock()
	cur := h.sess
	h.mu.Unlock()
	if cur == nil || cur.IsClosed() {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.pingTimeout)
	defer cancel()
	_, err := h.ping(ctx, cur)
	return err == nil
}

// settleKeys brings the key file in line after cairn-init proved itself
// with used. A proof with the pending key means the last re-key reached
// it: that key is now the only one. A proof with the recorded key while
// a re-key is pending, or with a key inherited from a memory image,
// means cairn-init needs a key of its own: the new key is recorded as
// accepted first, then sent (op rekey), and the old one dropped only
// after cairn-init acknowledged it, so that a crash at any point leaves
// cairn-init holding a key the file accepts.
func (h *Host) settleKeys(sess *yamux.Session, used agentauth.Key) error {
	h.keysMu.Lock()
	defer h.keysMu.Unlock()
	r := h.ring
	switch {
	case r.Key != used.String() && r.Next != used.String():
		return errors.New("the key it proved itself with is no longer accepted")
	case r.Next == used.String():
		return h.recordKeys(keyring{Version: keyringVersion, Key: r.Next})
	case r.Next == "" && !r.Inherited:
		return nil
	}
	next := agentauth.NewKey()
	r.Next = next.String()
	if err := h.recordKeys(r); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), rekeyTimeout)
	defer cancel()
	var res api.AgentResult
	st, err := request(ctx, sess, api.AgentRequest{Op: api.AgentOpRekey, Key: r.Next}, &res)
	if err != nil {
		return err
	}
	st.Close()
	if err := h.recordKeys(keyring{Version: keyringVersion, Key: r.Next}); err != nil {
		return err
	}
	h.log.Debug("agent: re-keyed")
	return nil
}

// recordKeys writes r to the key file and makes it the Host's keyring.
// The caller holds keysMu.
func (h *Host) recordKeys(r keyring) error {
	if err := writeKeyring(h.keyFile, r); err != nil {
		return err
	}
	h.ring = r
	return nil
}

// refusalLog logs refused connections without letting a flood of them
// flood the log: the first at once, then at most one line per
// refusalLogEvery with how many there were.
type refusalLog struct {
	log    *slog.Logger
	mu     sync.Mutex
	last   time.Time
	missed int
}

const refusalLogEvery = 10 * time.Second

func (r *refusalLog) note(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.last) < refusalLogEvery {
		r.missed++
		return
	}
	r.log.Warn("agent: refused a connection that did not prove itself", "reason", reason, "refused_since_last_report", r.missed)
	r.last, r.missed = time.Now(), 0
}
