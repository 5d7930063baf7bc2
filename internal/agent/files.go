package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/yamux"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// The files op: cairn-init works on the sandbox's files, so that paths are
// resolved in the sandbox's own mount namespace (see api/files.go). A Host
// checks the paths of a request first (V02) and answers failures inside
// the sandbox with the API's file codes (fileError).

// fileError is the API error of a files op that cairn-init answered with
// code and msg.
func fileError(code, msg string) error {
	apiCode := api.CodeFileFailed
	switch code {
	case api.AgentErrNotFound:
		apiCode = api.CodeNoFile
	case api.AgentErrInvalid:
		apiCode = api.CodeInvalidArgument
	case api.FileErrExists:
		apiCode = api.CodeFileExists
	case api.FileErrNotDir:
		apiCode = api.CodeNotDir
	case api.FileErrIsDir:
		apiCode = api.CodeIsDir
	case api.FileErrNotEmpty:
		apiCode = api.CodeDirNotEmpty
	case api.FileErrPermission:
		apiCode = api.CodeFileDenied
	case api.FileErrNoSpace:
		apiCode = api.CodeFileNoSpace
	case api.FileErrBadTar:
		apiCode = api.CodeBadTar
	case api.FileErrLimit:
		apiCode = api.CodeFileLimit
	case api.FileErrWatches:
		apiCode = api.CodeWatchLimit
	}
	return errdefs.New(apiCode, "%s", msg)
}

// files makes the files request req: it checks its paths and returns the
// stream after the first reply line, decoded into reply.
func (h *Host) files(ctx context.Context, req api.FileRequest, reply *api.FileReply) (*yamux.Stream, error) {
	p, err := api.CheckPath(req.Path)
	if err != nil {
		return nil, errdefs.New(api.CodeInvalidArgument, "%v", err)
	}
	req.Path = p
	if req.Op == api.FileOpRename {
		if req.To, err = api.CheckPath(req.To); err != nil {
			return nil, errdefs.New(api.CodeInvalidArgument, "rename to: %v", err)
		}
	}
	st, err := h.do(ctx, api.AgentRequest{Op: api.AgentOpFiles, Files: &req}, reply)
	if re, ok := errors.AsType[*replyError](err); ok {
		return nil, fileError(re.code, re.msg)
	}
	return st, err
}

// simple makes a files request whose one reply line is all its answer.
func (h *Host) simple(ctx context.Context, req api.FileRequest) (api.FileReply, error) {
	var reply api.FileReply
	st, err := h.files(ctx, req, &reply)
	if err != nil {
		return reply, err
	}
	st.Close()
	return reply, nil
}

// Stat returns the entry of path inside the sandbox (a symbolic link is
// itself). F01.
func (h *Host) Stat(ctx context.Context, path string) (api.FileEntry, error) {
	reply, err := h.simple(ctx, api.FileRequest{Op: api.FileOpStat, Path: path})
	if err != nil {
		return api.FileEntry{}, err
	}
	if reply.Entry == nil {
		return api.FileEntry{}, errdefs.New(api.CodeAgentUnreachable, "agent stat: no entry in the reply")
	}
	return *reply.Entry, nil
}

// MakeDir makes the directory req.Path (req.Mode, req.Owner, req.Parents)
// and reports whether it made it. F02, F03.
func (h *Host) MakeDir(ctx context.Context, req api.FileRequest) (api.FileEntry, bool, error) {
	req.Op = api.FileOpMkdir
	reply, err := h.simple(ctx, req)
	if err != nil || reply.Entry == nil {
		return api.FileEntry{}, false, err
	}
	return *reply.Entry, reply.Created, nil
}

// Remove removes path, with recursive a directory and all it holds. F01,
// F05.
func (h *Host) Remove(ctx context.Context, path string, recursive bool) error {
	_, err := h.simple(ctx, api.FileRequest{Op: api.FileOpRemove, Path: path, Recursive: recursive})
	return err
}

// Rename renames from to to and returns the entry at to. F01, F02, F05.
func (h *Host) Rename(ctx context.Context, from, to string) (api.FileEntry, error) {
	reply, err := h.simple(ctx, api.FileRequest{Op: api.FileOpRename, Path: from, To: to})
	if err != nil || reply.Entry == nil {
		return api.FileEntry{}, err
	}
	return *reply.Entry, nil
}

// lines reads the FileReply lines that follow a list's or a watch's first
// reply.
type lines struct {
	sc *bufio.Scanner
}

func newLines(st io.Reader) *lines {
	sc := bufio.NewScanner(st)
	sc.Buffer(make([]byte, 0, 64<<10), api.MaxMessage)
	return &lines{sc: sc}
}

// next returns the next line; io.EOF at a clean end of the stream.
func (l *lines) next() (api.FileReply, error) {
	var r api.FileReply
	if !l.sc.Scan() {
		if err := l.sc.Err(); err != nil {
			return r, err
		}
		return r, io.EOF
	}
	if err := json.Unmarshal(l.sc.Bytes(), &r); err != nil {
		return r, fmt.Errorf("decode agent message: %w", err)
	}
	if r.Error != "" {
		return r, fileError(r.Code, r.Error)
	}
	return r, nil
}

// List calls fn with each entry under path, depth levels deep (0 is 1),
// each directory's by name and followed by its own when deeper. An error
// of fn ends the list and is returned. F01, F03, L09, V02.
func (h *Host) List(ctx context.Context, path string, depth int, fn func(api.FileEntry) error) error {
	var reply api.FileReply
	st, err := h.files(ctx, api.FileRequest{Op: api.FileOpList, Path: path, Depth: depth}, &reply)
	if err != nil {
		return err
	}
	defer st.Close()
	stop := context.AfterFunc(ctx, func() { abort(st) })
	defer stop()
	ls := newLines(st)
	for {
		r, err := ls.next()
		switch {
		case err != nil && errdefs.CodeOf(err) != api.CodeInternal:
			return err
		case err != nil:
			return cut(ctx, "list", err)
		case r.Done:
			return nil
		case r.Entry != nil:
			if err := fn(*r.Entry); err != nil {
				abort(st)
				return err
			}
		}
	}
}

// cut is the error of a files stream that broke before its end.
func cut(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return errdefs.Wrap(api.CodeAgentUnreachable, err, "agent files %s: the stream broke", op)
}

// dataReader reads a read's or tar_out's data frames; Close ends the
// stream.
type dataReader struct {
	ctx  context.Context
	op   string
	st   *yamux.Stream
	fr   *api.FileDataReader
	stop func() bool
}

func (d *dataReader) Read(b []byte) (int, error) {
	n, err := d.fr.Read(b)
	if err == nil || errors.Is(err, io.EOF) {
		return n, err
	}
	if fe, ok := errors.AsType[*api.FileDataError](err); ok {
		return n, fileError(fe.Code, fe.Msg)
	}
	return n, cut(d.ctx, d.op, err)
}

func (d *dataReader) Close() error {
	d.stop()
	abort(d.st)
	return nil
}

// Read opens the file at path (its links followed inside the sandbox) and
// returns its entry and its content, which the caller closes. The
// content ends with io.EOF once all of it was read, or an error: F09 (a
// read failed inside), S07 (the stream broke). F01, F04, V02 (not a
// regular file).
func (h *Host) Read(ctx context.Context, path string) (api.FileEntry, io.ReadCloser, error) {
	return h.dataOut(ctx, api.FileRequest{Op: api.FileOpRead, Path: path})
}

// TarOut returns path as a tar stream (see api.FileOpTarOut) and its
// entry; the caller closes the stream. F01.
func (h *Host) TarOut(ctx context.Context, path string) (api.FileEntry, io.ReadCloser, error) {
	return h.dataOut(ctx, api.FileRequest{Op: api.FileOpTarOut, Path: path})
}

func (h *Host) dataOut(ctx context.Context, req api.FileRequest) (api.FileEntry, io.ReadCloser, error) {
	var reply api.FileReply
	st, err := h.files(ctx, req, &reply)
	if err != nil {
		return api.FileEntry{}, nil, err
	}
	if reply.Entry == nil {
		abort(st)
		return api.FileEntry{}, nil, errdefs.New(api.CodeAgentUnreachable, "agent %s: no entry in the reply", req.Op)
	}
	d := &dataReader{ctx: ctx, op: req.Op, st: st, fr: api.NewFileDataReader(st)}
	d.stop = context.AfterFunc(ctx, func() { abort(st) })
	return *reply.Entry, d, nil
}

// Write writes what body reads to req.Path (req.Mode, req.Owner,
// req.Parents) and returns its entry. The file is replaced only once all
// of body is there: if body fails or ctx ends first, it stays as it was.
// F02, F03, F04, F06, F07, V02.
func (h *Host) Write(ctx context.Context, req api.FileRequest, body io.Reader) (api.FileEntry, error) {
	req.Op = api.FileOpWrite
	reply, err := h.dataIn(ctx, req, body)
	if err != nil {
		return api.FileEntry{}, err
	}
	if reply.Entry == nil {
		return api.FileEntry{}, errdefs.New(api.CodeAgentUnreachable, "agent write: no entry in the reply")
	}
	return *reply.Entry, nil
}

// TarIn extracts the tar stream body reads into the directory req.Path
// (req.Parents: made if missing), keeping modes, owners and times. F01,
// F03, F07, F08, L09.
func (h *Host) TarIn(ctx context.Context, req api.FileRequest, body io.Reader) (api.TarResult, error) {
	req.Op = api.FileOpTarIn
	reply, err := h.dataIn(ctx, req, body)
	if err != nil {
		return api.TarResult{}, err
	}
	if reply.Tar == nil {
		return api.TarResult{}, errdefs.New(api.CodeAgentUnreachable, "agent tar_in: no result in the reply")
	}
	return *reply.Tar, nil
}

// BodyError wraps the error of reading the body of a Write or TarIn: the
// client's failure, not the sandbox's.
type BodyError struct{ Err error }

func (e *BodyError) Error() string { return "read the request body: " + e.Err.Error() }
func (e *BodyError) Unwrap() error { return e.Err }

// dataIn sends body as data frames after req's first reply and returns
// the last reply. It reads that reply while it sends, so that a failure
// inside (a full disk) stops the sending at once.
func (h *Host) dataIn(ctx context.Context, req api.FileRequest, body io.Reader) (api.FileReply, error) {
	var first api.FileReply
	st, err := h.files(ctx, req, &first)
	if err != nil {
		return first, err
	}
	defer st.Close()
	stop := context.AfterFunc(ctx, func() { abort(st) })
	defer stop()
	var (
		wg    sync.WaitGroup
		last  api.FileReply
		rerr  error
		early = make(chan struct{}) // closed when the last reply came
	)
	wg.Go(func() {
		defer close(early)
		rerr = api.ReadMessage(st, &last)
		if rerr == nil && last.Error != "" {
			abort(st) // stop the sending
		}
	})
	fw := api.NewFileDataWriter(st)
	_, serr := fw.ReadFrom(&bodyReader{r: body, early: early})
	if serr == nil {
		serr = fw.End(nil)
	}
	if _, ok := errors.AsType[*BodyError](serr); ok {
		abort(st) // cairn-init drops what it got
		wg.Wait()
		return last, serr
	}
	wg.Wait()
	switch {
	case rerr == nil && last.Error != "":
		return last, fileError(last.Code, last.Error)
	case rerr != nil:
		return last, cut(ctx, req.Op, rerr)
	case serr != nil:
		return last, cut(ctx, req.Op, serr)
	}
	return last, nil
}

// bodyReader wraps the errors of the body it reads as *BodyError, and
// stops at once when cairn-init replied early.
type bodyReader struct {
	r     io.Reader
	early <-chan struct{}
}

func (b *bodyReader) Read(p []byte) (int, error) {
	select {
	case <-b.early:
		return 0, errors.New("cairn-init replied before the end of the data")
	default:
	}
	n, err := b.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = &BodyError{Err: err}
	}
	return n, err
}

// Watch calls fn with each event under the directory path (with recursive,
// its subdirectories too) until ctx ends (then it returns nil), fn fails
// (its error), or the watch fails inside: the directory went (F01), the
// events overflowed (L09). L08 when the sandbox has api.MaxWatchStreams
// open already. F01, F03, V02.
func (h *Host) Watch(ctx context.Context, path string, recursive bool, ready func(), fn func(api.FileEvent) error) error {
	var reply api.FileReply
	st, err := h.files(ctx, api.FileRequest{Op: api.FileOpWatch, Path: path, Recursive: recursive}, &reply)
	if err != nil {
		return err
	}
	defer st.Close()
	stop := context.AfterFunc(ctx, func() { abort(st) })
	defer stop()
	if ready != nil {
		ready()
	}
	ls := newLines(st)
	for {
		r, err := ls.next()
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && errdefs.CodeOf(err) != api.CodeInternal:
			return err
		case err != nil:
			return cut(ctx, "watch", err)
		case r.Event != nil:
			if err := fn(*r.Event); err != nil {
				return err
			}
		}
	}
}
