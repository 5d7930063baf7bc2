package initd

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/yamux"
	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/agentauth"
)

// headerTimeout bounds how long a new stream may take to send its header.
const headerTimeout = 10 * time.Second

// handle serves one stream opened by cairnd: a JSON header line naming the
// op, then what the op defines. Every op closes the stream when done.
func (s *server) handle(st *yamux.Stream) {
	defer st.Close()
	_ = st.SetReadDeadline(time.Now().Add(headerTimeout))
	req, err := readRequest(st)
	if err != nil {
		s.log.Warn("refused request", "op", req.Op, "err", err)
		s.replyError(st, err)
		return
	}
	_ = st.SetReadDeadline(time.Time{})
	switch req.Op {
	case api.AgentOpPing:
		s.reply(st, api.AgentInfo{Version: s.cfg.Version, PID: os.Getpid(), BootID: s.bootID})
	case api.AgentOpExec:
		if req.Exec == nil {
			s.replyError(st, errors.New("exec: no exec request"))
			return
		}
		s.serveExec(st, *req.Exec)
	case api.AgentOpAttach:
		s.serveAttach(st, req.Session)
	case api.AgentOpAck:
		s.serveAck(st, req.Session)
	case api.AgentOpServices:
		s.serveServices(st)
	case api.AgentOpLogs:
		s.serveLogs(st, req.Logs)
	case api.AgentOpSync:
		unix.Sync()
		s.reply(st, api.AgentResult{OK: true})
	case api.AgentOpHostname:
		if err := unix.Sethostname([]byte(req.Hostname)); err != nil {
			s.replyError(st, fmt.Errorf("sethostname: %w", err))
			return
		}
		s.reply(st, api.AgentResult{OK: true})
	case api.AgentOpRekey:
		key, err := agentauth.ParseKey([]byte(req.Key))
		if err != nil {
			s.replyError(st, &opError{code: api.AgentErrInvalid, msg: "rekey: " + err.Error()})
			return
		}
		s.keyMu.Lock()
		s.key = key
		s.keyMu.Unlock()
		s.reply(st, api.AgentResult{OK: true})
	case api.AgentOpEvents:
		s.serveEvents(st)
	case api.AgentOpFiles:
		s.serveFiles(st, req.Files)
	case api.AgentOpProcesses:
		s.serveProcesses(st)
	case api.AgentOpProcess, api.AgentOpProcessAttach, api.AgentOpProcessStdin, api.AgentOpProcessSignal, api.AgentOpProcessWait:
		s.serveProcess(st, req.Op, req.Process)
	case api.AgentOpShutdown:
		s.exit(false)
		grace := time.Duration(req.GraceMS) * time.Millisecond
		s.log.Info("shutdown requested", "grace", grace)
		s.terminate(grace)
		// Every process is gone: flush what they wrote before the host
		// removes the sandbox.
		unix.Sync()
		s.reply(st, api.AgentResult{OK: true})
		st.Close()
		s.stop()
	default:
		s.replyError(st, fmt.Errorf("unknown op %q", req.Op))
	}
}

func (s *server) reply(st *yamux.Stream, v any) {
	if err := api.WriteMessage(st, v); err != nil {
		s.log.Warn("reply to cairnd", "err", err)
	}
}

// replyError answers that the op failed (errorReply).
func (s *server) replyError(st *yamux.Stream, err error) {
	s.reply(st, errorReply(err))
}
