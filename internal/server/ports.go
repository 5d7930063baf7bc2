package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// Published ports, the account's port token and raw TCP connections to a
// port (see docs/ports.md).

func (s *Server) listPorts(w http.ResponseWriter, r *http.Request) error {
	ports, err := s.ports.Ports(r.Context(), s.account(r), r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ports)
	return nil
}

func (s *Server) publishPort(w http.ResponseWriter, r *http.Request) error {
	var req api.PublishPortRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	p, err := s.ports.Publish(r.Context(), s.account(r), r.PathValue("name"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

func (s *Server) unpublishPort(w http.ResponseWriter, r *http.Request) error {
	port, err := portParam(r)
	if err != nil {
		return err
	}
	name := r.PathValue("name")
	if err := s.ports.Unpublish(r.Context(), s.account(r), name, port); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"unpublished": fmt.Sprintf("%s/%d", name, port)})
	return nil
}

func (s *Server) getPortToken(w http.ResponseWriter, r *http.Request) error {
	return s.portToken(w, r, false)
}

func (s *Server) rotatePortToken(w http.ResponseWriter, r *http.Request) error {
	return s.portToken(w, r, true)
}

func (s *Server) portToken(w http.ResponseWriter, r *http.Request, rotate bool) error {
	tok, err := s.ports.Token(r.Context(), s.account(r), rotate)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, tok)
	return nil
}

// portParam reads the {port} of the path: a decimal number (its range is
// the role's to check).
func portParam(r *http.Request) (int, error) {
	raw := r.PathValue("port")
	port, err := strconv.Atoi(raw)
	if err != nil || len(raw) > 5 {
		return 0, errdefs.New(api.CodeInvalidArgument, "invalid port %q: want a number from %d to %d", raw, api.MinPort, api.MaxPort)
	}
	return port, nil
}

// connectPort opens a TCP connection to a port inside the sandbox. The
// request must ask to upgrade to cairn-tcp; cairnd answers 101 and from
// then on copies bytes both ways between the client and the port, until
// the port's side ends (or either side fails). A client that half-closes
// its side gets the port's side half-closed too, and the answer still
// comes back.
func (s *Server) connectPort(w http.ResponseWriter, r *http.Request) error {
	port, err := portParam(r)
	if err != nil {
		return err
	}
	if r.Header.Get("Upgrade") != api.ConnectUpgrade {
		return errdefs.New(api.CodeInvalidRequest, "a connect must ask for `Upgrade: %s`", api.ConnectUpgrade)
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		return errdefs.New(api.CodeInvalidRequest, "connection cannot be upgraded")
	}
	ctx, done := s.openSession(r)
	defer done()
	backend, err := s.ports.Connect(ctx, s.account(r), r.PathValue("name"), port)
	if err != nil {
		return err
	}
	defer backend.Close()
	conn, buf, err := hj.Hijack()
	if err != nil {
		return err
	}
	defer conn.Close()
	// The connection lasts as long as the TCP connection: no deadline of
	// the request (package httpedge) applies to it any more. The end of
	// the token (revoked, expired) closes both sides: raw bytes have no
	// way to say why.
	conn.SetDeadline(time.Time{})
	fmt.Fprintf(buf, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\n\r\n", api.ConnectUpgrade)
	if err := buf.Flush(); err != nil {
		return nil
	}
	stop := context.AfterFunc(ctx, func() {
		if tokenEnded(ctx) != nil {
			conn.Close()
			backend.Close()
		}
	})
	defer stop()
	splice(conn, buf.Reader, backend)
	return nil
}

// splice copies client (read through in, which may hold bytes already
// buffered) to backend and backend to client. The client's end of input
// half-closes the backend, if it can be; the backend's end of output ends
// both.
func splice(client net.Conn, in io.Reader, backend net.Conn) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		io.Copy(backend, in)
		if cw, ok := backend.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			backend.Close()
		}
	}()
	io.Copy(client, backend)
	client.Close()
	backend.Close()
	wg.Wait()
}
