package console

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"

	"github.com/coder/websocket"

	"github.com/cairn-sandbox/cairn/api"
)

// The terminal: a browser cannot make the exec protocol's HTTP upgrade,
// so the page opens a WebSocket to /console/terminal/{name}?csrf=…&rows=
// &cols= and the console makes the exec request (a shell on a tty) on its
// behalf, in process, through the API handler: the same authentication,
// checks and audit as `cairn exec -t`. Then it carries, both ways:
//
//	page → console: binary messages: the terminal's input (stdin frames);
//	                text messages: {"rows":R,"cols":C} (resize frames)
//	console → page: binary messages: the terminal's output;
//	                a last text message: {"exit":{…}} (the shell ended),
//	                {"error":{code,message}} (the exec was refused) or
//	                {"ended":"…"} (the session was cut: a restore, a stop)
//
// The WebSocket handshake carries the cookie; the CSRF token goes in the
// query (a browser cannot set headers on it) and the origin is checked.

// terminalMessage is a text message of the terminal's WebSocket.
type terminalMessage struct {
	Exit  *api.ExitStatus `json:"exit,omitempty"`
	Error *api.ErrorInfo  `json:"error,omitempty"`
	Ended string          `json:"ended,omitempty"`
}

// terminalShell is what the terminal runs.
var terminalShell = []string{"/bin/sh", "-c", "if command -v bash >/dev/null; then exec bash -l; fi; exec sh -l"}

func (c *Console) terminal(apiHandler http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, se, ok := c.session(w, r)
		if !ok {
			return
		}
		if !sameOrigin(r) || !se.csrfOK(r.URL.Query().Get("csrf")) {
			refused(w, "a terminal needs the session's CSRF token (csrf=…) from a page of this origin")
			return
		}
		rows, _ := strconv.ParseUint(r.URL.Query().Get("rows"), 10, 16)
		cols, _ := strconv.ParseUint(r.URL.Query().Get("cols"), 10, 16)
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ws.SetReadLimit(api.MaxFramePayload)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		msg, code := bridge(ctx, ws, apiHandler, r, se.token, api.ExecRequest{
			Command: terminalShell, TTY: true, Stdin: true, Rows: uint16(rows), Cols: uint16(cols),
			Env: []string{"TERM=xterm-256color"},
		})
		if b, err := json.Marshal(msg); err == nil {
			ws.Write(ctx, websocket.MessageText, b)
		}
		ws.Close(code, "")
	})
}

// bridge runs req through apiHandler as r's session and carries the
// session between ws and the exec stream until it ends; it returns the
// last message for the page.
func bridge(ctx context.Context, ws *websocket.Conn, apiHandler http.Handler, r *http.Request, token string, req api.ExecRequest) (terminalMessage, websocket.StatusCode) {
	body, _ := json.Marshal(req)
	er, err := http.NewRequestWithContext(ctx, http.MethodPost, "/v1/sandboxes/"+pathEscape(r.PathValue("name"))+"/exec", bytes.NewReader(body))
	if err != nil {
		return terminalMessage{Error: &api.ErrorInfo{Code: api.CodeInvalidRequest, Message: err.Error()}}, websocket.StatusPolicyViolation
	}
	er.RemoteAddr, er.Host = r.RemoteAddr, r.Host
	er.Header.Set("Authorization", "Bearer "+token)
	er.Header.Set("Content-Type", "application/json")
	er.Header.Set("Upgrade", "cairn-exec")
	er.Header.Set("Connection", "Upgrade")
	hw := newHijackWriter()
	done := make(chan struct{})
	go func() {
		defer close(done)
		apiHandler.ServeHTTP(hw, er)
		hw.server.Close()
	}()
	select {
	case <-hw.hijacked:
	case <-done:
		// Refused before the upgrade: the API's error answer.
		var eb api.ErrorBody
		if json.Unmarshal(hw.rec.Body.Bytes(), &eb) != nil || eb.Error.Code == "" {
			eb.Error = api.ErrorInfo{Code: api.CodeInternal, Message: "the exec was not upgraded"}
		}
		return terminalMessage{Error: &eb.Error}, websocket.StatusNormalClosure
	}
	conn := hw.client
	defer func() { conn.Close(); <-done }()
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, er)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		return terminalMessage{Ended: "The terminal could not start."}, websocket.StatusInternalError
	}
	// Page → sandbox.
	var wmu sync.Mutex
	go func() {
		defer conn.Close()
		for {
			typ, b, err := ws.Read(ctx)
			if err != nil {
				wmu.Lock()
				api.WriteFrame(conn, api.FrameStdinClose, nil)
				wmu.Unlock()
				return
			}
			wmu.Lock()
			if typ == websocket.MessageBinary {
				err = api.WriteFrame(conn, api.FrameStdin, b)
			} else {
				var rs api.Resize
				if json.Unmarshal(b, &rs) == nil && rs.Rows > 0 && rs.Cols > 0 {
					p, _ := json.Marshal(rs)
					err = api.WriteFrame(conn, api.FrameResize, p)
				}
			}
			wmu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	// Sandbox → page, until the Exit frame.
	for {
		t, p, err := api.ReadFrame(br)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, net.ErrClosed) {
				return terminalMessage{Ended: "The terminal's session ended without an exit status: the sandbox was restored, rolled back or stopped. Open a new shell."}, websocket.StatusNormalClosure
			}
			return terminalMessage{Ended: "The terminal's session broke: " + err.Error()}, websocket.StatusNormalClosure
		}
		switch t {
		case api.FrameStdout, api.FrameStderr:
			if err := ws.Write(ctx, websocket.MessageBinary, p); err != nil {
				return terminalMessage{}, websocket.StatusGoingAway
			}
		case api.FrameExit:
			var st api.ExitStatus
			json.Unmarshal(p, &st)
			return terminalMessage{Exit: &st}, websocket.StatusNormalClosure
		}
	}
}

// hijackWriter is the response writer of the in-process exec request: an
// answer before the upgrade is recorded; the upgrade hands the handler
// one end of a pipe, whose other end the bridge reads.
type hijackWriter struct {
	rec            *httptest.ResponseRecorder
	server, client net.Conn
	hijacked       chan struct{}
	once           sync.Once
}

func newHijackWriter() *hijackWriter {
	s, c := net.Pipe()
	return &hijackWriter{rec: httptest.NewRecorder(), server: s, client: c, hijacked: make(chan struct{})}
}

func (h *hijackWriter) Header() http.Header         { return h.rec.Header() }
func (h *hijackWriter) Write(b []byte) (int, error) { return h.rec.Write(b) }
func (h *hijackWriter) WriteHeader(code int)        { h.rec.WriteHeader(code) }

func (h *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h.once.Do(func() { close(h.hijacked) })
	return h.server, bufio.NewReadWriter(bufio.NewReader(h.server), bufio.NewWriter(h.server)), nil
}

// pathEscape escapes a sandbox name for a path (names are [a-z0-9-], but
// the page's input is not trusted).
func pathEscape(s string) string {
	return (&url.URL{Path: s}).EscapedPath()
}
