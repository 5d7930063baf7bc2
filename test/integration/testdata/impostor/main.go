// Command impostor runs inside a sandbox in the integration tests and
// tries what a hostile process there would try against cairn-init's
// connection to cairnd (see security_test.go):
//
//	impostor [-uid N] -out FILE -for D takeover
//	    dials /.cairn/agent.sock again and again for D, answers the
//	    handshake with a made-up proof and then serves yamux anyway, and
//	    also dials with no handshake at all (as an agent from before
//	    it); writes what it got into FILE as JSON.
//	impostor steal
//	    tries to read cairn-init's memory, environment and standard
//	    input; prints one line per attempt: "NAME ok …" or "NAME denied …".
//
// It is built with CGO_ENABLED=0 and copied in by the test.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/hashicorp/yamux"
	"golang.org/x/sys/unix"
)

const sock = "/.cairn/agent.sock"

// report is what a takeover got.
type report struct {
	UID        int            `json:"uid"`
	DialErrors map[string]int `json:"dial_errors"`
	Connected  int            `json:"connected"`  // dials that reached cairnd
	Challenges int            `json:"challenges"` // handshake challenges received
	Verdicts   map[string]int `json:"verdicts"`   // what cairnd answered the made-up proof
	Streams    []string       `json:"streams"`    // request headers cairnd sent: the takeover worked
}

func main() {
	uid := flag.Int("uid", -1, "switch to this uid and gid first")
	out := flag.String("out", "", "report file (takeover)")
	dur := flag.Duration("for", 5*time.Second, "how long to try (takeover)")
	flag.Parse()
	var outf *os.File
	if *out != "" {
		f, err := os.Create(*out) // before the switch: /tmp may not be ours
		if err != nil {
			fail(err)
		}
		os.Chmod(*out, 0o666)
		outf = f
	}
	if *uid >= 0 {
		if err := syscall.Setgroups(nil); err != nil {
			fail(err)
		}
		if err := syscall.Setgid(*uid); err != nil {
			fail(err)
		}
		if err := syscall.Setuid(*uid); err != nil {
			fail(err)
		}
	}
	switch flag.Arg(0) {
	case "takeover":
		r := takeover(*dur)
		b, _ := json.Marshal(r)
		outf.Write(append(b, '\n'))
		outf.Close()
	case "steal":
		steal()
	default:
		fail(fmt.Errorf("unknown mode %q", flag.Arg(0)))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "impostor:", err)
	os.Exit(1)
}

func takeover(d time.Duration) report {
	r := report{UID: os.Getuid(), DialErrors: map[string]int{}, Verdicts: map[string]int{}, Streams: []string{}}
	deadline := time.Now().Add(d)
	for i := 0; time.Now().Before(deadline); i++ {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			msg := err.Error()
			if _, after, ok := strings.Cut(msg, "connect: "); ok {
				msg = after
			}
			r.DialErrors[msg]++
			time.Sleep(20 * time.Millisecond)
			continue
		}
		r.Connected++
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		if i%2 == 0 {
			// Play along with the handshake, with a proof made up.
			if line, err := readLine(conn); err == nil && strings.HasPrefix(line, "cairn-agent-auth/") {
				r.Challenges++
			}
			conn.Write([]byte("proof " + strings.Repeat("0", 64) + "\n"))
			line, err := readLine(conn)
			if err != nil {
				line = "no verdict: " + err.Error()
			}
			r.Verdicts[line]++
		}
		// Serve yamux whatever was said, and answer every request as
		// cairn-init would.
		serve(conn, &r, deadline)
		conn.Close()
	}
	return r
}

// serve accepts cairnd's streams on conn until it breaks or the time is
// up, recording each request header and answering it.
func serve(conn net.Conn, r *report, deadline time.Time) {
	_ = conn.SetDeadline(time.Time{})
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	sess, err := yamux.Server(conn, cfg)
	if err != nil {
		return
	}
	defer sess.Close()
	timer := time.AfterFunc(min(time.Until(deadline), 500*time.Millisecond), func() { sess.Close() })
	defer timer.Stop()
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			return
		}
		timer.Reset(time.Until(deadline)) // it works: hold on to it
		line, err := readLine(st)
		if err != nil {
			st.Close()
			continue
		}
		r.Streams = append(r.Streams, line)
		switch {
		case strings.Contains(line, `"op":"ping"`):
			fmt.Fprintf(st, `{"version":"impostor","pid":1,"boot_id":"%032x"}`+"\n", 0)
		case strings.Contains(line, `"op":"exec"`):
			fmt.Fprintf(st, `{"pid":4242}`+"\n")
			st.SetReadDeadline(time.Now().Add(time.Second))
			if b, _ := io.ReadAll(st); len(b) > 0 {
				r.Streams = append(r.Streams, "stdin frames: "+strconv.Quote(string(b)))
			}
		default:
			fmt.Fprintf(st, `{"ok":true}`+"\n")
		}
		st.Close()
	}
}

func readLine(rd io.Reader) (string, error) {
	var b []byte
	c := make([]byte, 1)
	for len(b) < 64<<10 {
		if _, err := io.ReadFull(rd, c); err != nil {
			return string(b), err
		}
		if c[0] == '\n' {
			return string(b), nil
		}
		b = append(b, c[0])
	}
	return string(b), nil
}

// steal tries every way to cairn-init's key a process inside could try.
func steal() {
	report := func(name string, err error, detail string) {
		if err != nil {
			fmt.Printf("%s denied %v\n", name, err)
		} else {
			fmt.Printf("%s ok %s\n", name, detail)
		}
	}
	b, err := os.ReadFile("/proc/1/environ")
	report("environ", err, fmt.Sprintf("%d bytes", len(b)))
	l, err := os.Readlink("/proc/1/fd/0")
	report("fd0-link", err, l)
	f, err := os.Open("/proc/1/fd/0")
	if err == nil {
		f.SetReadDeadline(time.Now().Add(time.Second))
		n, rerr := f.Read(make([]byte, 128))
		f.Close()
		report("fd0-open", nil, fmt.Sprintf("read %d bytes (%v)", n, rerr))
	} else {
		report("fd0-open", err, "")
	}
	maps, err := os.ReadFile("/proc/1/maps")
	report("maps", err, fmt.Sprintf("%d bytes", len(maps)))
	addr := uint64(0x400000) // where a static Go binary's text starts
	if err == nil {
		if start, _, ok := strings.Cut(string(maps), "-"); ok {
			addr, _ = strconv.ParseUint(start, 16, 64)
		}
	}
	m, err := os.Open("/proc/1/mem")
	if err == nil {
		n, rerr := m.ReadAt(make([]byte, 64), int64(addr))
		m.Close()
		if rerr != nil && n == 0 {
			err = rerr
		}
		report("mem", err, fmt.Sprintf("read %d bytes at %#x", n, addr))
	} else {
		report("mem", err, "")
	}
	buf := make([]byte, 64)
	local := []syscall.Iovec{{Base: &buf[0], Len: 64}}
	remote := []struct{ base, len uintptr }{{uintptr(addr), 64}}
	n, _, errno := syscall.Syscall6(unix.SYS_PROCESS_VM_READV, 1,
		uintptr(unsafe.Pointer(&local[0])), 1, uintptr(unsafe.Pointer(&remote[0])), 1, 0)
	if errno != 0 {
		report("process_vm_readv", errno, "")
	} else {
		report("process_vm_readv", nil, fmt.Sprintf("read %d bytes", n))
	}
	if err := syscall.PtraceAttach(1); err != nil {
		report("ptrace", err, "")
	} else {
		syscall.PtraceDetach(1)
		report("ptrace", nil, "attached")
	}
}
