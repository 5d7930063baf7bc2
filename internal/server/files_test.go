package server

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// FS answers the fake's file system of a sandbox; f.err fails it.
func (f *fake) FS(_ context.Context, account, name string) (FS, error) {
	if f.err != nil {
		return nil, f.err
	}
	return fakeFS{f, account, name}, nil
}

// fakeFS records each call as Files.METHOD with the sandbox's name first.
type fakeFS struct {
	f             *fake
	account, name string
}

var fakeEntry = api.FileEntry{Name: "f", Path: "/d/f", Type: api.FileTypeFile, Size: 5, Mode: 0o644, ModTime: time.Unix(0, 0)}

func (fs fakeFS) rec(method string, args ...any) {
	fs.f.record("Files."+method, fs.account, append([]any{fs.name}, args...)...)
}

func (fs fakeFS) Stat(_ context.Context, p string) (api.FileEntry, error) {
	fs.rec("Stat", p)
	return fakeEntry, nil
}

func (fs fakeFS) List(_ context.Context, p string, depth int, fn func(api.FileEntry) error) error {
	fs.rec("List", p, depth)
	if p == "/missing" {
		return errdefs.New(api.CodeNoFile, "no %s", p)
	}
	for range 2 {
		if err := fn(fakeEntry); err != nil {
			return err
		}
	}
	return nil
}

func (fs fakeFS) Read(_ context.Context, p string) (api.FileEntry, io.ReadCloser, error) {
	fs.rec("Read", p)
	return fakeEntry, io.NopCloser(strings.NewReader("hello")), nil
}

func (fs fakeFS) Write(_ context.Context, req api.FileRequest, body io.Reader) (api.FileEntry, error) {
	b, _ := io.ReadAll(body)
	mode := -1
	if req.Mode != nil {
		mode = int(*req.Mode)
	}
	fs.rec("Write", req.Path, mode, req.Owner, req.Parents, string(b))
	return fakeEntry, nil
}

func (fs fakeFS) MakeDir(_ context.Context, req api.FileRequest) (api.FileEntry, bool, error) {
	fs.rec("MakeDir", req.Path, req.Parents)
	return fakeEntry, true, nil
}

func (fs fakeFS) Remove(_ context.Context, p string, recursive bool) error {
	fs.rec("Remove", p, recursive)
	return nil
}

func (fs fakeFS) Rename(_ context.Context, from, to string) (api.FileEntry, error) {
	fs.rec("Rename", from, to)
	return fakeEntry, nil
}

func (fs fakeFS) TarOut(_ context.Context, p string) (api.FileEntry, io.ReadCloser, error) {
	fs.rec("TarOut", p)
	return fakeEntry, io.NopCloser(strings.NewReader("TARBYTES")), nil
}

func (fs fakeFS) TarIn(_ context.Context, req api.FileRequest, body io.Reader) (api.TarResult, error) {
	b, _ := io.ReadAll(body)
	fs.rec("TarIn", req.Path, req.Parents, string(b))
	return api.TarResult{Entries: 1, Bytes: int64(len(b))}, nil
}

func (fs fakeFS) Watch(ctx context.Context, p string, recursive bool, ready func(), fn func(api.FileEvent) error) error {
	fs.rec("Watch", p, recursive)
	ready()
	return fn(api.FileEvent{Type: api.FileEventCreate, Name: "x", Path: p + "/x"})
}

// Bad paths, modes and depths are refused before the sandbox is asked.
func TestFilesBadInput(t *testing.T) {
	f := newFake(t)
	s := f.server()
	long := "/" + strings.Repeat("a", api.MaxPath)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/sandboxes/web/files", ""},
		{"GET", "/v1/sandboxes/web/files?path=etc/passwd", ""},
		{"GET", "/v1/sandboxes/web/files?path=" + long, ""},
		{"GET", "/v1/sandboxes/web/files?path=/a%00b", ""},
		{"PUT", "/v1/sandboxes/web/files?path=/a&mode=999", "x"},
		{"PUT", "/v1/sandboxes/web/files?path=/a&mode=17777", "x"},
		{"PUT", "/v1/sandboxes/web/files?path=/a&parents=maybe", "x"},
		{"GET", "/v1/sandboxes/web/files/list?path=/&depth=0", ""},
		{"GET", "/v1/sandboxes/web/files/list?path=/&depth=65", ""},
		{"DELETE", "/v1/sandboxes/web/files?path=/a&recursive=yes", ""},
		{"POST", "/v1/sandboxes/web/files/mkdir", `{"path":"/a","mode":65535}`},
	} {
		rec := serve(t, s, c.method, c.path, c.body)
		if e := errorOf(t, rec); rec.Code != http.StatusBadRequest || e.Code != api.CodeInvalidArgument {
			t.Errorf("%s %.80s: %d %+v, want 400 V02", c.method, c.path, rec.Code, e)
		}
	}
	if calls := f.takeCalls(); len(calls) != 0 {
		t.Errorf("bad requests reached the sandbox: %+v", calls)
	}
}

// A path is cleaned before it goes in: ../.. never climbs above /.
func TestFilesPathCleaned(t *testing.T) {
	f := newFake(t)
	rec := serve(t, f.server(), "GET", "/v1/sandboxes/web/files?path=/../../../etc/./shadow", "")
	if rec.Code != 200 || rec.Body.String() != "hello" {
		t.Fatalf("read: %d %s", rec.Code, rec.Body)
	}
	checkCalls(t, "read", f.takeCalls(), &call{"Files.Read", def, []any{"web", "/etc/shadow"}}, "")
}

// A list that fails before its first entry answers the error; an empty
// list is [].
func TestFilesListError(t *testing.T) {
	f := newFake(t)
	rec := serve(t, f.server(), "GET", "/v1/sandboxes/web/files/list?path=/missing", "")
	if e := errorOf(t, rec); rec.Code != 404 || e.Code != api.CodeNoFile {
		t.Fatalf("list of a missing directory: %d %+v", rec.Code, e)
	}
}
