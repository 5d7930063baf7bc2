package initd_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/agent"
	"github.com/cairn-sandbox/cairn/internal/initd"
)

func TestExecOutputAndExitCode(t *testing.T) {
	h := start(t)
	r := run(t, h, api.ExecRequest{Command: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}})
	if r.stdout != "out\n" || r.stderr != "err\n" || r.exit != (api.ExitStatus{Code: 3}) {
		t.Errorf("got %+v", r)
	}
}

func TestExecEnvironmentAndDir(t *testing.T) {
	h := startWith(t, initd.Config{Env: []string{"FOO=base", "BASE=base", "HOME=/home/base", "TERM=dumb"}})
	r := run(t, h, api.ExecRequest{
		Command: []string{"sh", "-c", `echo "$FOO $BASE $HOME ${TERM-unset} $PATH"; pwd`},
		Env:     []string{"FOO=bar", "HOME=/nowhere", "FOO=baz"},
		Dir:     "/tmp",
	})
	want := "baz base /nowhere unset /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/.cairn/bin\n/tmp\n"
	if r.stdout != want || r.exit.Code != 0 {
		t.Errorf("got %+v, want stdout %q", r, want)
	}
	r = run(t, h, api.ExecRequest{Command: []string{"pwd"}})
	if r.stdout != "/\n" {
		t.Errorf("default dir: %q", r.stdout)
	}
}

// cairn's tools end the PATH that cairn-init got, not the one a request sets.
func TestExecPathEndsWithTools(t *testing.T) {
	h := startWith(t, initd.Config{Env: []string{"PATH=/usr/bin:/bin"}})
	if r := run(t, h, api.ExecRequest{Command: []string{"sh", "-c", `echo "$PATH"`}}); r.stdout != "/usr/bin:/bin:/.cairn/bin\n" {
		t.Errorf("base PATH: %q", r.stdout)
	}
	r := run(t, h, api.ExecRequest{Command: []string{"/bin/sh", "-c", `echo "$PATH"`}, Env: []string{"PATH=/bin"}})
	if r.stdout != "/bin\n" {
		t.Errorf("PATH of the request: %q", r.stdout)
	}
}

func TestExecStdin(t *testing.T) {
	h := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, st, err := h.Exec(ctx, api.ExecRequest{Command: []string{"cat"}, Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	send(t, st, api.FrameStdin, []byte("hello\n"))
	send(t, st, api.FrameStdin, []byte("world\n"))
	send(t, st, api.FrameStdinClose, nil)
	if r := collect(t, st); r.stdout != "hello\nworld\n" || r.exit.Code != 0 {
		t.Errorf("got %+v", r)
	}
}

func TestExecWithoutStdinReadsDevNull(t *testing.T) {
	h := start(t)
	r := run(t, h, api.ExecRequest{Command: []string{"sh", "-c", "cat; readlink /proc/self/fd/0"}})
	if r.stdout != "/dev/null\n" {
		t.Errorf("got %+v", r)
	}
}

func TestExecStartErrors(t *testing.T) {
	h := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, tc := range []struct {
		req  api.ExecRequest
		want string
	}{
		{api.ExecRequest{Command: []string{"nosuch"}}, `exec: "nosuch": executable file not found in $PATH`},
		{api.ExecRequest{Command: []string{"nosuch"}, Detach: true}, `exec: "nosuch": executable file not found in $PATH`},
		{api.ExecRequest{Command: []string{"ls"}, Env: []string{"PATH=/nonexistent"}}, `exec: "ls": executable file not found in $PATH`},
		{api.ExecRequest{Command: []string{"/nonexistent/x"}}, `fork/exec /nonexistent/x: no such file or directory`},
		{api.ExecRequest{Command: []string{"ls"}, Dir: "/nonexistent"}, `exec: dir "/nonexistent": no such file or directory`},
		{api.ExecRequest{Command: []string{"ls"}, Dir: "/etc/passwd"}, `exec: dir "/etc/passwd": not a directory`},
		{api.ExecRequest{}, `exec: no command`},
	} {
		_, st, err := h.Exec(ctx, tc.req)
		var se *agent.StartError
		if !errors.As(err, &se) || se.Msg != tc.want || st != nil {
			t.Errorf("%+v: got %v (%T), want StartError %q", tc.req, err, err, tc.want)
		}
	}
}

func TestExecKilledBySignal(t *testing.T) {
	h := start(t)
	r := run(t, h, api.ExecRequest{Command: []string{"sh", "-c", "kill -TERM $$"}})
	if r.exit != (api.ExitStatus{Code: 143, Signal: "SIGTERM"}) {
		t.Errorf("got %+v", r.exit)
	}
}

// A command past its timeout is killed with its process group and exits
// with 124, timed out; one that ends in time is not.
func TestExecTimeout(t *testing.T) {
	h := start(t)
	t0 := time.Now()
	r := run(t, h, api.ExecRequest{Command: []string{"sh", "-c", "sleep 30 & sleep 30"}, TimeoutSeconds: 0.3})
	if r.exit != (api.ExitStatus{Code: api.ExitTimedOut, Signal: "SIGKILL", TimedOut: true}) {
		t.Errorf("got %+v, want timed out", r.exit)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("the timed-out command took %v", d)
	}
	if r := run(t, h, api.ExecRequest{Command: []string{"true"}, TimeoutSeconds: 5}); r.exit != (api.ExitStatus{}) {
		t.Errorf("a command within its timeout: %+v", r.exit)
	}
}

func TestExecSignalFrame(t *testing.T) {
	h := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, st, err := h.Exec(ctx, api.ExecRequest{Command: []string{"sh", "-c", "echo ready; exec sleep 30"}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	readUntil(t, st, "ready")
	send(t, st, api.FrameSignal, []byte{byte(unix.SIGINT)})
	if r := collect(t, st); r.exit != (api.ExitStatus{Code: 130, Signal: "SIGINT"}) {
		t.Errorf("got %+v", r.exit)
	}
}

func TestExecTTY(t *testing.T) {
	h := start(t)
	r := run(t, h, api.ExecRequest{
		Command: []string{"sh", "-c", "tty; stty size; echo $TERM; echo err >&2"},
		TTY:     true, Rows: 33, Cols: 77,
	})
	if !regexp.MustCompile(`^/dev/pts/\d+\r\n33 77\r\nxterm-256color\r\nerr\r\n$`).MatchString(r.stdout) || r.stderr != "" || r.exit.Code != 0 {
		t.Errorf("got %+v", r)
	}
}

func TestExecTTYResizeAndInput(t *testing.T) {
	h := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, st, err := h.Exec(ctx, api.ExecRequest{
		Command: []string{"sh", "-c", "stty size; read line; echo got $line; stty size; cat"},
		TTY:     true, Stdin: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	readUntil(t, st, "24 80") // the default size
	resize, _ := json.Marshal(api.Resize{Rows: 50, Cols: 120})
	send(t, st, api.FrameResize, resize)
	send(t, st, api.FrameStdin, []byte("hi\n"))
	send(t, st, api.FrameStdinClose, nil) // ^D ends cat
	r := collect(t, st)
	if !strings.Contains(r.stdout, "got hi\r\n50 120\r\n") || r.exit.Code != 0 {
		t.Errorf("got %+v", r)
	}
}

// A background process that keeps stdout open must not hold the session
// open once the command has exited.
func TestExecBackgroundChildDoesNotHoldSession(t *testing.T) {
	h := start(t)
	for _, tty := range []bool{false, true} {
		r := run(t, h, api.ExecRequest{Command: []string{"sh", "-c", "sleep 30 & echo $!; echo done"}, TTY: tty})
		lines := strings.Fields(r.stdout)
		if len(lines) != 2 || lines[1] != "done" {
			t.Fatalf("tty %v: got %+v", tty, r)
		}
		if pid, err := strconv.Atoi(lines[0]); err == nil {
			unix.Kill(pid, unix.SIGKILL)
		}
	}
}

func TestExecClientGoneHangsUp(t *testing.T) {
	h := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pid, st, err := h.Exec(ctx, api.ExecRequest{Command: []string{"sh", "-c", "echo ready; exec sleep 30"}})
	if err != nil {
		t.Fatal(err)
	}
	readUntil(t, st, "ready")
	st.Close() // ends our side only: we can still read what follows
	if r := collect(t, st); r.exit != (api.ExitStatus{Code: 129, Signal: "SIGHUP"}) {
		t.Errorf("after closing the stream: %+v", r)
	}
	waitGone(t, pid)

	// Ending the context of Exec does the same.
	ctx2, cancel2 := context.WithCancel(ctx)
	pid, st, err = h.Exec(ctx2, api.ExecRequest{Command: []string{"sh", "-c", "echo ready; exec sleep 30"}, TTY: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	readUntil(t, st, "ready")
	cancel2()
	waitGone(t, pid)
}

func TestExecDetach(t *testing.T) {
	h := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pid, st, err := h.Exec(ctx, api.ExecRequest{Command: []string{"sleep", "0.5"}, Detach: true})
	if err != nil || st != nil {
		t.Fatalf("exec: %v, %v", st, err)
	}
	if s := procState(t, pid); s != "R" && s != "S" {
		t.Fatalf("detached process state %q, want running or sleeping", s)
	}
	if out, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/1"); out != "/dev/null" {
		t.Errorf("stdout of detached process: %q, %v", out, err)
	}
	if pgid, err := unix.Getpgid(pid); pgid != pid {
		t.Errorf("process group of detached process: %d, %v", pgid, err)
	}
	waitGone(t, pid) // exited and reaped, not a zombie
}

func TestSync(t *testing.T) {
	h := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}
