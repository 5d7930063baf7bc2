package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/agent"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// ExecUpgrade is the protocol name of an upgraded exec connection.
const ExecUpgrade = "cairn-exec"

// execSandbox runs a command. Detached: answers {"pid":N}. Attached: the
// request must ask to upgrade to cairn-exec; cairnd answers 101 and from
// then on pipes exec frames (package api) both ways between the client and
// cairn-init, until the Exit frame. The agent's stream carries the session
// across a broken connection to cairn-init (a memory checkpoint breaks it),
// so the client sees every output frame once, in order; if the session
// cannot be re-attached, the client's connection is closed without an
// Exit frame. See docs/exec-protocol.md.
func (s *Server) execSandbox(w http.ResponseWriter, r *http.Request) error {
	var req api.ExecRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if !req.Detach && r.Header.Get("Upgrade") != ExecUpgrade {
		return errdefs.New(api.CodeInvalidRequest, "an attached exec must ask for `Upgrade: %s`", ExecUpgrade)
	}
	hj, ok := w.(http.Hijacker)
	if !req.Detach && !ok {
		return errdefs.New(api.CodeInvalidRequest, "connection cannot be upgraded")
	}
	pid, stream, err := s.processes.Exec(r.Context(), s.account(r), r.PathValue("name"), req)
	if err != nil {
		return err
	}
	if req.Detach {
		writeJSON(w, http.StatusOK, api.ExecStarted{PID: pid})
		return nil
	}
	defer stream.Close()
	conn, buf, err := hj.Hijack()
	if err != nil {
		return err
	}
	defer conn.Close()
	// The session lasts as long as the command: no read deadline of the
	// request (package httpedge) applies to it any more.
	conn.SetDeadline(time.Time{})
	fmt.Fprintf(buf, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\nCairn-Exec-Pid: %d\r\n\r\n", ExecUpgrade, pid)
	if err := buf.Flush(); err != nil {
		return nil
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Client → sandbox. When the client goes away the stream closes
		// and cairn-init hangs up the process. A frame too large ends the
		// copy too.
		io.Copy(stream, buf.Reader)
		stream.Close()
	}()
	// Sandbox → client, until the Exit frame (then the stream reads EOF).
	if _, err := io.Copy(conn, stream); errors.Is(err, agent.ErrSessionLost) {
		slog.Warn("exec session lost; closing the client's connection", "sandbox", r.PathValue("name"), "pid", pid, "err", err)
	}
	conn.Close()
	wg.Wait()
	return nil
}
