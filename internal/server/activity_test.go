package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

func readActivity(t *testing.T, br *bufio.Reader) api.SandboxActivity {
	t.Helper()
	line, err := br.ReadBytes('\n')
	if err != nil {
		t.Fatalf("reading an event: %v (read %q)", err, line)
	}
	var ev api.SandboxActivity
	if err := json.Unmarshal(line, &ev); err != nil {
		t.Fatalf("event %q: %v", line, err)
	}
	return ev
}

func TestSandboxEvents(t *testing.T) {
	f := newFake(t)
	srv := httptest.NewServer(f.server())
	defer srv.Close()
	f.hub.Publish(api.SandboxActivity{Type: api.ActivityState, State: "running"})
	f.hub.Publish(api.SandboxActivity{Type: api.ActivityOOMKill, What: "pid 7 (awk)"})
	kept, _ := f.hub.Since("", 0)

	// What is kept, after ?since.
	resp := request(t, srv, "GET", fmt.Sprintf("/v1/sandboxes/web/events?since=%d", kept[0].Seq), "")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != ndjson || strings.Count(string(body), "\n") != 1 || !strings.Contains(string(body), `"oom_kill"`) {
		t.Fatalf("since=1: %s %q", resp.Status, body)
	}

	// Bad parameters and an unknown sandbox.
	for _, tc := range []struct {
		path   string
		status int
		code   string
	}{
		{"/v1/sandboxes/web/events?follow=maybe", 400, api.CodeInvalidArgument},
		{"/v1/sandboxes/web/events?since=-1", 400, api.CodeInvalidArgument},
		{"/v1/sandboxes/web/events?since=x", 400, api.CodeInvalidArgument},
	} {
		resp := request(t, srv, "GET", tc.path, "")
		if got := answerCode(t, resp); resp.StatusCode != tc.status || got != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.path, resp.StatusCode, got, tc.status, tc.code)
		}
	}
	f.err = errdefs.New(api.CodeNoSandbox, "no sandbox named %q", "nope")
	resp = request(t, srv, "GET", "/v1/sandboxes/nope/events", "")
	if got := answerCode(t, resp); resp.StatusCode != http.StatusNotFound || got != api.CodeNoSandbox {
		t.Errorf("unknown sandbox: %d %s", resp.StatusCode, got)
	}
	f.err = nil

	// Following: the kept ones, then each new one, until deleted.
	resp = request(t, srv, "GET", "/v1/sandboxes/web/events?follow=true", "")
	br := bufio.NewReader(resp.Body)
	if ev := readActivity(t, br); ev.State != "running" {
		t.Fatalf("first: %+v", ev)
	}
	readActivity(t, br)
	f.hub.Publish(api.SandboxActivity{Type: api.ActivityCheckpoint, Checkpoint: "v0"})
	if ev := readActivity(t, br); ev.Checkpoint != "v0" || ev.Seq != kept[1].Seq+1 {
		t.Fatalf("new: %+v", ev)
	}
	f.hub.Publish(api.SandboxActivity{Type: api.ActivityDeleted})
	if ev := readActivity(t, br); ev.Type != api.ActivityDeleted {
		t.Fatalf("last: %+v", ev)
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Fatalf("after the deleted event: %q %v, want the end of the stream", rest, err)
	}
}

// answerCode reads an error answer's code.
func answerCode(t *testing.T, resp *http.Response) string {
	t.Helper()
	var eb api.ErrorBody
	json.NewDecoder(resp.Body).Decode(&eb)
	return eb.Error.Code
}

// A follow with nothing to say sends blank lines (so a client that went
// is found), and StopFollowers (cairnd's shutdown) ends it at once.
func TestSandboxEventsKeepaliveAndShutdown(t *testing.T) {
	old := keepaliveEvery
	keepaliveEvery = 20 * time.Millisecond
	defer func() { keepaliveEvery = old }()
	f := newFake(t)
	s := f.server()
	srv := httptest.NewServer(s)
	defer srv.Close()
	resp := request(t, srv, "GET", "/v1/sandboxes/quiet/events?follow=true", "")
	br := bufio.NewReader(resp.Body)
	for range 2 {
		if line, err := br.ReadString('\n'); err != nil || line != "\n" {
			t.Fatalf("keepalive: %q %v", line, err)
		}
	}
	s.StopFollowers()
	done := make(chan error, 1)
	go func() { _, err := io.ReadAll(br); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the stream ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("StopFollowers did not end the follow")
	}
}
