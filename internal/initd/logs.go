package initd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/yamux"
	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/api"
)

// opError is an op's failure that the reply marks with a code (one of
// the api.AgentErr… constants).
type opError struct {
	code string
	msg  string
}

func (e *opError) Error() string { return e.msg }

// serveServices answers with the state of every service.
func (s *server) serveServices(st *yamux.Stream) {
	s.reply(st, api.ServicesReply{Services: s.services.status()})
}

// serveLogs answers with the end of a service's log: the reply line, then
// the bytes it announces.
func (s *server) serveLogs(st *yamux.Stream, req *api.LogsRequest) {
	if req == nil {
		s.replyError(st, &opError{api.AgentErrInvalid, "logs: no logs request"})
		return
	}
	b, size, err := s.services.tail(req.Service, req.TailBytes)
	if err != nil {
		s.replyError(st, err)
		return
	}
	s.reply(st, api.LogsReply{Bytes: len(b), Size: size})
	if _, err := st.Write(b); err != nil {
		s.log.Warn("send service log", "service", req.Service, "err", err)
	}
}

// tail returns the last n bytes (api.DefaultLogTail if 0, at most
// api.MaxLogTail) of the log of service name and the log's size. A service
// that has no log yet has an empty one. The log must be a regular file,
// not a symbolic link.
func (m *services) tail(name string, n int) ([]byte, int64, error) {
	if !serviceName.MatchString(name) {
		return nil, 0, &opError{api.AgentErrInvalid, fmt.Sprintf("invalid service name %q", name)}
	}
	if !m.has(name) {
		return nil, 0, &opError{api.AgentErrNotFound, fmt.Sprintf("no service %q", name)}
	}
	switch {
	case n < 0:
		return nil, 0, &opError{api.AgentErrInvalid, fmt.Sprintf("tail_bytes %d is negative", n)}
	case n == 0:
		n = api.DefaultLogTail
	case n > api.MaxLogTail:
		n = api.MaxLogTail
	}
	path := filepath.Join(m.logDir, name+".log")
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("log of service %q: %w", name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("log of service %q: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("log of service %q: %s is not a regular file", name, path)
	}
	size := fi.Size()
	off := max(size-int64(n), 0)
	b := make([]byte, size-off)
	got, err := f.ReadAt(b, off)
	if err != nil && !errors.Is(err, io.EOF) { // EOF: it was truncated meanwhile
		return nil, 0, fmt.Errorf("log of service %q: %w", name, err)
	}
	return b[:got], size, nil
}

// has reports whether a service called name was defined at boot.
func (m *services) has(name string) bool {
	for _, sv := range m.list { // m.list does not change after boot
		if sv.def.Name == name {
			return true
		}
	}
	return false
}
