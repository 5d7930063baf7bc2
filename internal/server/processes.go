package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// The processes of a sandbox (docs/api.md#processes): background
// processes, which cairn-init keeps, and the attached execs that run. Each
// is named by its pid inside the sandbox.

// pidOf is the {pid} of r's path. V02.
func pidOf(r *http.Request) (int, error) {
	v := r.PathValue("pid")
	pid, err := strconv.Atoi(v)
	if err != nil || pid <= 0 {
		return 0, errdefs.New(api.CodeInvalidArgument, "process id %q: a pid inside the sandbox (see `cairn ps`)", v)
	}
	return pid, nil
}

// parseSignal reads a signal by name (TERM, SIGTERM, term) or number;
// "" is SIGTERM. V02.
func parseSignal(v string) (int, error) {
	if v == "" {
		return int(unix.SIGTERM), nil
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 1 || n > 64 {
			return 0, errdefs.New(api.CodeInvalidArgument, "signal %d: from 1 to 64", n)
		}
		return n, nil
	}
	name := strings.ToUpper(v)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return int(sig), nil
	}
	return 0, errdefs.New(api.CodeInvalidArgument, "signal %q: a name (TERM, KILL, INT, HUP, USR1…) or a number", v)
}

func (s *Server) listProcesses(w http.ResponseWriter, r *http.Request) error {
	list, err := s.processes.Processes(r.Context(), s.account(r), r.PathValue("name"))
	if err != nil {
		return err
	}
	if list == nil {
		list = []api.Process{}
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

func (s *Server) getProcess(w http.ResponseWriter, r *http.Request) error {
	pid, err := pidOf(r)
	if err != nil {
		return err
	}
	p, err := s.processes.Process(r.Context(), s.account(r), r.PathValue("name"), pid)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

// signalProcess sends a signal to a process's group: {"signal":"KILL"};
// an empty body sends TERM.
func (s *Server) signalProcess(w http.ResponseWriter, r *http.Request) error {
	pid, err := pidOf(r)
	if err != nil {
		return err
	}
	var req api.SignalRequest
	if r.ContentLength != 0 {
		if err := decode(w, r, &req); err != nil {
			return err
		}
	}
	sig, err := parseSignal(req.Signal)
	if err != nil {
		return err
	}
	if err := s.processes.SignalProcess(r.Context(), s.account(r), r.PathValue("name"), pid, sig); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.AgentResult{OK: true})
	return nil
}

// writeStdin writes the body (at most api.MaxStdinWrite bytes) to a
// background process's stdin; ?close=true closes it after.
func (s *Server) writeStdin(w http.ResponseWriter, r *http.Request) error {
	pid, err := pidOf(r)
	if err != nil {
		return err
	}
	closeAfter := false
	if v := r.URL.Query().Get("close"); v != "" {
		if closeAfter, err = strconv.ParseBool(v); err != nil {
			return errdefs.New(api.CodeInvalidArgument, "close=%q: true or false", v)
		}
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxStdinWrite))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return errdefs.New(api.CodeInvalidRequest, "stdin: a write is at most %d bytes; send more in several", api.MaxStdinWrite)
		}
		return errdefs.Wrap(api.CodeInvalidRequest, err, "stdin: read the body")
	}
	if err := s.processes.WriteStdin(r.Context(), s.account(r), r.PathValue("name"), pid, data, closeAfter); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.AgentResult{OK: true})
	return nil
}

// waitProcess answers once a background process has exited, with its
// exit status.
func (s *Server) waitProcess(w http.ResponseWriter, r *http.Request) error {
	pid, err := pidOf(r)
	if err != nil {
		return err
	}
	streamBody(w) // it waits as long as the process runs
	ctx, done := s.openSession(r)
	defer done()
	p, err := s.processes.WaitProcess(ctx, s.account(r), r.PathValue("name"), pid)
	if err != nil {
		if cause := tokenEnded(ctx); cause != nil {
			return cause
		}
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

// attachProcess attaches to a background process: like an attached exec
// the request asks to upgrade to cairn-exec; after the 101 the connection
// carries its output from the offset of the body on (a Dropped frame where
// bytes were dropped), then its Exit frame, and takes Stdin, StdinClose
// and Signal frames. The client closing its connection leaves the process
// running. Header Cairn-Output-Offset says where the output starts.
func (s *Server) attachProcess(w http.ResponseWriter, r *http.Request) error {
	pid, err := pidOf(r)
	if err != nil {
		return err
	}
	var req api.AttachRequest
	if r.ContentLength != 0 {
		if err := decode(w, r, &req); err != nil {
			return err
		}
	}
	if req.Offset < 0 {
		return errdefs.New(api.CodeInvalidArgument, "offset %d: 0 or more", req.Offset)
	}
	if r.Header.Get("Upgrade") != ExecUpgrade {
		return errdefs.New(api.CodeInvalidRequest, "an attach must ask for `Upgrade: %s`", ExecUpgrade)
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		return errdefs.New(api.CodeInvalidRequest, "connection cannot be upgraded")
	}
	ctx, done := s.openSession(r)
	defer done()
	p, stream, err := s.processes.AttachProcess(ctx, s.account(r), r.PathValue("name"), pid, req.Offset)
	if err != nil {
		return err
	}
	defer stream.Close()
	conn, buf, err := hj.Hijack()
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Time{})
	fmt.Fprintf(buf, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\nCairn-Exec-Pid: %d\r\nCairn-Output-Offset: %d\r\n\r\n", ExecUpgrade, pid, p.Offset)
	if err := buf.Flush(); err != nil {
		return nil
	}
	stop := context.AfterFunc(ctx, func() {
		if tokenEnded(ctx) != nil {
			stream.Close()
			conn.SetWriteDeadline(time.Now().Add(time.Second))
		}
	})
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() {
		// Client → process: stdin, its close, signals. Hangup frames
		// mean nothing here; the client's end leaves the process be.
		for {
			t, payload, err := api.ReadFrame(buf.Reader)
			if err != nil {
				stream.Close()
				return
			}
			if t == api.FrameHangup {
				continue
			}
			if api.WriteFrame(stream, t, payload) != nil {
				return
			}
		}
	})
	if err := copyFrames(conn, stream); err != nil && tokenEnded(ctx) == nil {
		slog.Debug("process attach ended before the exit frame", "sandbox", r.PathValue("name"), "pid", pid, "err", err)
	}
	if err := tokenEnded(ctx); err != nil {
		b, _ := json.Marshal(api.ErrorInfo{Code: errdefs.CodeOf(err), Message: err.Error()})
		api.WriteFrame(conn, api.FrameError, b)
	}
	conn.Close()
	stream.Close()
	wg.Wait()
	return nil
}
