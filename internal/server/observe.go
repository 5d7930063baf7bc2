package server

import (
	"bufio"
	"net"
	"net/http"
	"time"
)

// RequestObserver is told about every request a route table answers
// (package metrics).
type RequestObserver interface {
	// Request: a request to api ("host": cairnd's socket and listener;
	// "sandbox": a management socket) matched route (its method and
	// pattern, "GET /v1/sandboxes/{name}", or unmatchedRoute) and was
	// answered with status and the error code code ("" for none) after
	// took, the time to its response's header: for a stream or an
	// upgrade, the time to its start.
	Request(api, route string, status int, code string, took time.Duration)
}

// The APIs of RequestObserver.Request.
const (
	hostAPI    = "host"
	sandboxAPI = "sandbox"
)

// unmatchedRoute is the route of requests that match none (an unknown
// path or a method the path does not have): never their raw path.
const unmatchedRoute = "unmatched"

// observe returns w wrapped so that the answer to the request is told to
// the server's observer, once done is called (when the handler returns);
// w itself and a no-op without an observer.
func (s *Server) observe(w http.ResponseWriter, api, route string) (http.ResponseWriter, func()) {
	if s.requests == nil {
		return w, func() {}
	}
	o := &observedWriter{ResponseWriter: w, start: time.Now()}
	done := func() {
		status, at := o.status, o.headerAt
		if status == 0 { // nothing written: net/http answers 200
			status, at = http.StatusOK, time.Now()
		}
		s.requests.Request(api, route, status, o.code, at.Sub(o.start))
	}
	if _, ok := w.(http.Hijacker); ok {
		return hijackWriter{o}, done
	}
	return o, done
}

// observedWriter notes the status, the time of the header and the error
// code of an answer.
type observedWriter struct {
	http.ResponseWriter
	start, headerAt time.Time
	status          int
	code            string
}

func (o *observedWriter) began(status int) {
	if o.status == 0 {
		o.status, o.headerAt = status, time.Now()
	}
}

func (o *observedWriter) WriteHeader(status int) {
	o.began(status)
	o.ResponseWriter.WriteHeader(status)
}

func (o *observedWriter) Write(b []byte) (int, error) {
	o.began(http.StatusOK)
	return o.ResponseWriter.Write(b)
}

func (o *observedWriter) Flush() {
	o.began(http.StatusOK)
	if f, ok := o.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (o *observedWriter) Unwrap() http.ResponseWriter { return o.ResponseWriter }

// setCode notes the error code of the answer (writeError).
func (o *observedWriter) setCode(code string) { o.code = code }

// hijackWriter is an observedWriter over a writer that can be hijacked:
// an upgrade (exec, connect) counts as answered 101 when it is.
type hijackWriter struct{ *observedWriter }

func (h hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, buf, err := h.ResponseWriter.(http.Hijacker).Hijack()
	if err == nil {
		h.began(http.StatusSwitchingProtocols)
	}
	return conn, buf, err
}
