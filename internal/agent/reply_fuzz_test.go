package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// fakeInit is the cairn-init end of a real yamux connection that answers
// each stream cairnd opens with the bytes given to it, then closes it.
type fakeInit struct {
	host    *Host
	replies chan []byte
}

func newFakeInit(tb testing.TB) *fakeInit {
	c1, c2 := net.Pipe()
	hostSess, err := yamux.Client(c1, nil)
	if err != nil {
		tb.Fatal(err)
	}
	initSess, err := yamux.Server(c2, nil)
	if err != nil {
		tb.Fatal(err)
	}
	fi := &fakeInit{host: &Host{sess: hostSess, changed: make(chan struct{})}, replies: make(chan []byte, 1)}
	go func() {
		for {
			st, err := initSess.AcceptStream()
			if err != nil {
				return
			}
			var req api.AgentRequest
			api.ReadMessage(st, &req)
			st.Write(<-fi.replies)
			st.Close()
		}
	}()
	tb.Cleanup(func() { hostSess.Close(); initSess.Close() })
	return fi
}

// FuzzReplies feeds cairnd's side of the agent protocol replies made of
// arbitrary bytes, through a real yamux connection: what cairn-init in a
// sandbox under an attacker's control could send. Services and
// ServiceLogs never hang or panic; a reply line that carries an error
// gives that error (with its code's meaning), never a success; any other
// failure is S07 (agent unreachable); a success is exactly what the line
// (and, for logs, the bytes after it) said, within the limits.
func FuzzReplies(f *testing.F) {
	f.Add(false, []byte(`{"services":[{"name":"web","state":"running","pid":7,"restarts":0,"since":"2026-03-01T12:00:00Z","restart":"always","cmd":["sleep","1"]}]}`+"\n"))
	f.Add(false, []byte(`{"error":"no such thing","code":"not_found"}`+"\n"))
	f.Add(false, []byte(`{"services":[{"name":"\u001b[31m"}]}`))
	f.Add(true, []byte(`{"bytes":5,"size":100}`+"\nhello"))
	f.Add(true, []byte(`{"bytes":5,"size":100}`+"\nhel"))
	f.Add(true, []byte(`{"bytes":-1}`+"\n"))
	f.Add(true, []byte(`{"bytes":2000000}`+"\n"))
	f.Add(true, []byte(`{"error":"no service \"web\"","code":"not_found"}`+"\n"))
	f.Add(true, []byte(`{"error":"bad","code":"invalid"}`+"\n"))
	f.Add(true, []byte(`{"error":""}`+"\n"))
	fi := newFakeInit(f)
	f.Fuzz(func(t *testing.T, logs bool, data []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		fi.replies <- data
		start := time.Now()
		var (
			err      error
			services []api.ServiceStatus
			logBytes []byte
		)
		if logs {
			logBytes, err = fi.host.ServiceLogs(ctx, "web", 0)
		} else {
			services, err = fi.host.Services(ctx)
		}
		if time.Since(start) > 4*time.Second {
			t.Fatalf("took %v", time.Since(start))
		}
		line, rest, whole := bytes.Cut(data, []byte("\n"))
		limit := api.MaxMessage
		if !logs {
			limit = api.MaxServicesReply
		}
		var res api.AgentResult
		isError := whole && len(line)+1 <= limit && json.Unmarshal(line, &res) == nil && res.Error != ""
		if isError {
			var re *replyError
			var ns *NoServiceError
			switch {
			case err == nil:
				t.Fatalf("reply %q carries an error, but the call succeeded", line)
			case logs && res.Code == api.AgentErrNotFound:
				if !errors.As(err, &ns) {
					t.Fatalf("not_found reply gave %v, want a NoServiceError", err)
				}
			case logs && res.Code == api.AgentErrInvalid:
				if !errdefs.Is(err, api.CodeInvalidArgument) {
					t.Fatalf("invalid reply gave %v, want V02", err)
				}
			case !errors.As(err, &re) || re.msg != res.Error:
				t.Fatalf("error reply %q gave %v", res.Error, err)
			}
			return
		}
		if err != nil {
			var re *replyError
			if !errors.As(err, &re) && !errdefs.Is(err, api.CodeAgentUnreachable) {
				t.Fatalf("failure %v is neither the agent's error nor S07", err)
			}
			return
		}
		if !whole || len(line)+1 > limit {
			t.Fatalf("success from a reply without a whole line within %d bytes: %q", limit, data)
		}
		if logs {
			var lr api.LogsReply
			if err := json.Unmarshal(line, &lr); err != nil {
				t.Fatalf("success from an undecodable reply %q", line)
			}
			if lr.Bytes < 0 || lr.Bytes > api.MaxLogTail || len(logBytes) != lr.Bytes || !bytes.Equal(logBytes, rest[:lr.Bytes]) {
				t.Fatalf("log of %d bytes for reply %q", len(logBytes), line)
			}
			return
		}
		var sr api.ServicesReply
		if err := json.Unmarshal(line, &sr); err != nil || !reflect.DeepEqual(sr.Services, services) {
			t.Fatalf("services %+v, but the reply says %q", services, line)
		}
	})
}
