package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
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

// execSandbox runs a command. Detached or in the background: answers
// {"pid":N}. Attached: the
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
	attached := !req.Detach && !req.Background
	if attached && r.Header.Get("Upgrade") != ExecUpgrade {
		return errdefs.New(api.CodeInvalidRequest, "an attached exec must ask for `Upgrade: %s`", ExecUpgrade)
	}
	hj, ok := w.(http.Hijacker)
	if attached && !ok {
		return errdefs.New(api.CodeInvalidRequest, "connection cannot be upgraded")
	}
	ctx, done := s.openSession(r)
	defer done()
	pid, stream, err := s.processes.Exec(ctx, s.account(r), r.PathValue("name"), req)
	if err != nil {
		return err
	}
	if !attached {
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
	// The token's end (revoked, expired) cuts the session: the stream
	// closes, so cairn-init hangs the command up as when the client goes,
	// and a client slow to read gets a moment for the Error frame.
	stop := context.AfterFunc(ctx, func() {
		if tokenEnded(ctx) != nil {
			stream.Close()
			conn.SetWriteDeadline(time.Now().Add(time.Second))
		}
	})
	defer stop()
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
	// Sandbox → client, frame by frame, until the Exit frame (then the
	// stream reads EOF): whole frames only, so that an Error frame can
	// follow the last one.
	if err := copyFrames(conn, stream); errors.Is(err, agent.ErrSessionLost) && tokenEnded(ctx) == nil {
		slog.Warn("exec session lost; closing the client's connection", "sandbox", r.PathValue("name"), "pid", pid, "err", err)
	}
	if err := tokenEnded(ctx); err != nil {
		b, _ := json.Marshal(api.ErrorInfo{Code: errdefs.CodeOf(err), Message: err.Error()})
		api.WriteFrame(conn, api.FrameError, b)
	}
	conn.Close()
	wg.Wait()
	return nil
}

// copyFrames copies exec frames from src to dst, each in one write,
// until src ends (nil at a clean end between frames) or either fails.
func copyFrames(dst io.Writer, src io.Reader) error {
	in := bufio.NewReaderSize(src, 64<<10)
	buf := make([]byte, 5+4096)
	for {
		if _, err := io.ReadFull(in, buf[:5]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		n := int(binary.BigEndian.Uint32(buf[1:5]))
		if n > api.MaxFramePayload {
			return api.ErrFrameTooLarge
		}
		if 5+n > cap(buf) {
			nb := make([]byte, 5+n)
			copy(nb, buf[:5])
			buf = nb
		}
		frame := buf[:5+n]
		if _, err := io.ReadFull(in, frame[5:]); err != nil {
			return err
		}
		if _, err := dst.Write(frame); err != nil {
			return err
		}
	}
}
