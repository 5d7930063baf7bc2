package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/agent"
	"github.com/cairn-sandbox/cairn/internal/bounds"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// The Files API (docs/files.md): a running sandbox's files, worked on by
// its cairn-init, so that every path is the sandbox's own. A path is
// always ?path=/absolute/path; bodies and answers of any size stream.

// fsOf is the file system of the request's sandbox.
func (s *Server) fsOf(r *http.Request) (FS, error) {
	return s.files.FS(r.Context(), s.account(r), r.PathValue("name"))
}

// queryPath is ?name= of the request: required, absolute, at most
// api.MaxPath bytes. V02.
func queryPath(q url.Values, name string) (string, error) {
	v := q.Get(name)
	if v == "" {
		return "", errdefs.New(api.CodeInvalidArgument, "?%s= is required: an absolute path inside the sandbox", name)
	}
	p, err := api.CheckPath(v)
	if err != nil {
		return "", errdefs.New(api.CodeInvalidArgument, "?%s=: %v", name, err)
	}
	return p, nil
}

// fileOptions reads ?mode= (octal), ?owner= and ?parents= (default
// true) into req.
func fileOptions(q url.Values, req *api.FileRequest) error {
	if v := q.Get("mode"); v != "" {
		m, err := strconv.ParseUint(v, 8, 32)
		if err != nil || m > 0o7777 {
			return errdefs.New(api.CodeInvalidArgument, "?mode=%q is not an octal mode of at most 07777", v)
		}
		mode := uint32(m)
		req.Mode = &mode
	}
	req.Owner = q.Get("owner")
	req.Parents = true
	if q.Get("parents") != "" {
		b, err := queryBool(q, "parents")
		if err != nil {
			return err
		}
		req.Parents = b
	}
	return nil
}

// streamBody lifts the request's read deadline: a body of any size takes
// as long as it takes.
func streamBody(w http.ResponseWriter) {
	http.NewResponseController(w).SetReadDeadline(time.Time{})
}

// bodyError is err, or V03 if it is the client's body that failed.
func bodyError(err error) error {
	if be, ok := errors.AsType[*agent.BodyError](err); ok {
		if t := bodyTimeout(be.Err); t != nil {
			return t
		}
		return errdefs.Wrap(api.CodeInvalidRequest, be.Err, "request body")
	}
	return err
}

// readFile answers a file's content (?path=), its links followed inside
// the sandbox. A failure after the first byte cuts the answer (the client
// sees the connection end before the last chunk).
func (s *Server) readFile(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPath(r.URL.Query(), "path")
	if err != nil {
		return err
	}
	fs, err := s.fsOf(r)
	if err != nil {
		return err
	}
	e, rc, err := fs.Read(r.Context(), p)
	if err != nil {
		return err
	}
	defer rc.Close()
	return sendData(w, "application/octet-stream", e, rc)
}

// sendData answers 200 with what rc reads; a failure of rc after the
// answer started aborts the connection.
func sendData(w http.ResponseWriter, contentType string, e api.FileEntry, rc io.Reader) error {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Last-Modified", e.ModTime.UTC().Format(http.TimeFormat))
	h.Set("Cairn-File-Mode", strconv.FormatUint(uint64(e.Mode), 8))
	w.WriteHeader(http.StatusOK)
	buf := make([]byte, api.FileChunk)
	if _, err := io.CopyBuffer(w, rc, buf); err != nil {
		panic(http.ErrAbortHandler) // the client must not take what it got for all of it
	}
	return nil
}

// writeFile writes the request's body to ?path= (?mode=, ?owner=,
// ?parents=) and answers its entry. The file is replaced only once the
// whole body is there.
func (s *Server) writeFile(w http.ResponseWriter, r *http.Request) error {
	fs, req, err := s.uploadOf(r)
	if err != nil {
		return err
	}
	streamBody(w)
	e, err := fs.Write(r.Context(), req, r.Body)
	if err != nil {
		return bodyError(err)
	}
	writeJSON(w, http.StatusOK, e)
	return nil
}

// uploadOf reads what an upload (a file, a tar stream) names: ?path= and
// its options (?mode=, ?owner=, ?parents=), and the sandbox's files.
func (s *Server) uploadOf(r *http.Request) (FS, api.FileRequest, error) {
	q := r.URL.Query()
	p, err := queryPath(q, "path")
	if err != nil {
		return nil, api.FileRequest{}, err
	}
	req := api.FileRequest{Path: p}
	if err := fileOptions(q, &req); err != nil {
		return nil, req, err
	}
	fs, err := s.fsOf(r)
	return fs, req, err
}

// statFile answers the entry of ?path= (a link is itself).
func (s *Server) statFile(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPath(r.URL.Query(), "path")
	if err != nil {
		return err
	}
	fs, err := s.fsOf(r)
	if err != nil {
		return err
	}
	e, err := fs.Stat(r.Context(), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, e)
	return nil
}

// listFiles answers the entries under the directory ?path=, ?depth=
// levels deep (default 1), as one JSON array streamed as they come.
func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	p, err := queryPath(q, "path")
	if err != nil {
		return err
	}
	depth := int64(1)
	if v := q.Get("depth"); v != "" {
		if depth, err = bounds.ParseInt("depth", v, 1, api.MaxListDepth); err != nil {
			return err
		}
	}
	fs, err := s.fsOf(r)
	if err != nil {
		return err
	}
	started := false
	enc := json.NewEncoder(w)
	err = fs.List(r.Context(), p, int(depth), func(e api.FileEntry) error {
		sep := ","
		if !started {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			started, sep = true, "["
		}
		if _, err := io.WriteString(w, sep); err != nil {
			return err
		}
		return enc.Encode(e)
	})
	switch {
	case err != nil && started:
		panic(http.ErrAbortHandler) // a list cut short must not parse as whole
	case err != nil:
		return err
	case !started:
		writeJSON(w, http.StatusOK, []api.FileEntry{})
	default:
		io.WriteString(w, "]\n")
	}
	return nil
}

// makeDir makes a directory: 201 with its entry, 200 if it existed
// (parents).
func (s *Server) makeDir(w http.ResponseWriter, r *http.Request) error {
	var body api.MakeDirRequest
	if err := decode(w, r, &body); err != nil {
		return err
	}
	if body.Mode != nil && *body.Mode > 0o7777 {
		return errdefs.New(api.CodeInvalidArgument, "mode %#o has bits beyond 07777", *body.Mode)
	}
	fs, err := s.fsOf(r)
	if err != nil {
		return err
	}
	e, created, err := fs.MakeDir(r.Context(), api.FileRequest{Path: body.Path, Mode: body.Mode, Owner: body.Owner, Parents: body.Parents})
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, e)
	return nil
}

// removeFile removes ?path= (with ?recursive=true a directory and all it
// holds).
func (s *Server) removeFile(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	p, err := queryPath(q, "path")
	if err != nil {
		return err
	}
	recursive, err := queryBool(q, "recursive")
	if err != nil {
		return err
	}
	fs, err := s.fsOf(r)
	if err != nil {
		return err
	}
	if err := fs.Remove(r.Context(), p, recursive); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"deleted": p})
	return nil
}

// renameFile renames a file or directory and answers its new entry.
func (s *Server) renameFile(w http.ResponseWriter, r *http.Request) error {
	var body api.RenameRequest
	if err := decode(w, r, &body); err != nil {
		return err
	}
	fs, err := s.fsOf(r)
	if err != nil {
		return err
	}
	e, err := fs.Rename(r.Context(), body.From, body.To)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, e)
	return nil
}

// tarOut answers ?path= as a tar stream, its entries named from its base
// name on (docker cp's, tar -C DIR BASE's).
func (s *Server) tarOut(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPath(r.URL.Query(), "path")
	if err != nil {
		return err
	}
	fs, err := s.fsOf(r)
	if err != nil {
		return err
	}
	e, rc, err := fs.TarOut(r.Context(), p)
	if err != nil {
		return err
	}
	defer rc.Close()
	return sendData(w, "application/x-tar", e, rc)
}

// tarIn extracts the tar stream of the body into the directory ?path=
// (made with its parents unless ?parents=false; ?owner= for what it
// makes).
func (s *Server) tarIn(w http.ResponseWriter, r *http.Request) error {
	fs, req, err := s.uploadOf(r)
	if err != nil {
		return err
	}
	streamBody(w)
	res, err := fs.TarIn(r.Context(), req, r.Body)
	if err != nil {
		return bodyError(err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// watchDir answers the events under the directory ?path= (?recursive=true:
// its subdirectories too) as NDJSON, one api.FileEvent a line, with a
// blank line now and then while nothing happens, until the client goes
// or cairnd stops. A watch that fails inside ends with one line in the
// error shape ({"error":{…}}).
func (s *Server) watchDir(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	p, err := queryPath(q, "path")
	if err != nil {
		return err
	}
	recursive, err := queryBool(q, "recursive")
	if err != nil {
		return err
	}
	fs, err := s.fsOf(r)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(r.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	defer context.AfterFunc(s.stopping, cancel)()
	flusher, _ := w.(http.Flusher)
	var mu sync.Mutex
	started := false
	write := func(b []byte) error {
		mu.Lock()
		defer mu.Unlock()
		if _, err := w.Write(b); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	}
	ready := func() {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		started = true
		if flusher != nil {
			flusher.Flush()
		}
		wg.Go(func() {
			t := time.NewTicker(keepaliveEvery)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				if write([]byte("\n")) != nil {
					cancel()
					return
				}
			}
		})
	}
	err = fs.Watch(ctx, p, recursive, ready, func(ev api.FileEvent) error {
		b, _ := json.Marshal(ev)
		return write(append(b, '\n'))
	})
	if err == nil || !started {
		return err
	}
	code := errdefs.CodeOf(err)
	b, _ := json.Marshal(api.ErrorBody{Error: api.ErrorInfo{Code: code, Message: err.Error()}})
	write(append(b, '\n'))
	return nil
}
