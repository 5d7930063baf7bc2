package network

import (
	"bufio"
	"github.com/cairn-sandbox/cairn/internal/network/nsfile"

	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/testenv"
	"github.com/cairn-sandbox/cairn/internal/testenv/testnet"
)

// These tests stand the sandbox's own network stack in with the kernel's:
// the sandbox namespace's eth0 is what gVisor would take over, so what
// the namespace's sockets reach is what a sandbox reaches.

func newManager(t *testing.T, in *testnet.Internet) *Manager {
	t.Helper()
	m, err := New(Config{Dir: filepath.Join(t.TempDir(), "net"), Uplink: in.Uplink, DNSUpstream: in.Upstream,
		Range: netip.MustParsePrefix("10.251.64.0/24")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Close()
		for id := range m.nets {
			m.Detach(id)
		}
		m.Sweep(func(string) bool { return false })
		if err := m.RemoveHostState(); err != nil {
			t.Error(err)
		}
	})
	return m
}

// get fetches http://addr/ from inside the namespace at ns. (The dial
// must happen on the namespace's thread: net/http would dial from
// another goroutine, in the host's namespace.)
func get(ns, addr string) (string, error) {
	var conn net.Conn
	err := nsfile.Run(ns, func() error {
		var err error
		conn, err = net.DialTimeout("tcp4", addr, 3*time.Second)
		return err
	})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(conn, "GET / HTTP/1.0\r\nHost: x\r\n\r\n"); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestEgressRulesAndWhatIsNeverReachable(t *testing.T) {
	testenv.Require(t)
	in := testnet.New(t)
	m := newManager(t, in)
	ctx := context.Background()
	att, err := m.Attach(ctx, "sb1", ModeEgress, Rules{Deny: []string{testnet.Other.String() + "/32"}})
	if err != nil {
		t.Fatal(err)
	}
	if body, err := get(att.NetNS, testnet.Allowed.String()+":80"); err != nil || !strings.Contains(body, "hello from") {
		debugPaths(t, m, "sb1")
		t.Fatalf("a public address: %q %v", body, err)
	}
	// Denied: fails fast, with a reset, not a timeout.
	start := time.Now()
	_, err = get(att.NetNS, testnet.Other.String()+":80")
	if err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
		out, _ := exec.Command("nsenter", "--net="+filepath.Join(m.cfg.Dir, "sb1", "router"), "nft", "list", "ruleset").CombinedOutput()
		t.Fatalf("a denied CIDR: %v\n%s", err, out)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("a denied CIDR took %v to fail", d)
	}
	// Never: the host itself (its uplink address, a port on it), the
	// metadata address, a private range.
	hostLn, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostLn.Close()
	go func() {
		for {
			c, err := hostLn.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := hostLn.Addr().(*net.TCPAddr).Port
	for _, target := range []string{
		netip.AddrPortFrom(netip.MustParseAddr("100.127.255.1"), uint16(port)).String(),
		"169.254.169.254:80", "10.1.2.3:80",
		netip.AddrPortFrom(netip.MustParseAddr("10.251.64.1"), uint16(port)).String(),
	} {
		err := nsfile.Run(att.NetNS, func() error {
			c, err := net.DialTimeout("tcp4", target, 2*time.Second)
			if err == nil {
				c.Close()
			}
			return err
		})
		if err == nil {
			t.Errorf("%s was reachable from the sandbox", target)
		} else if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.EHOSTUNREACH) && !errors.Is(err, syscall.ENETUNREACH) {
			t.Errorf("%s: did not fail fast: %v", target, err)
		}
	}
	// Rules changed at runtime: the denied address is reachable now.
	if err := m.Update("sb1", ModeEgress, Rules{}); err != nil {
		t.Fatal(err)
	}
	if _, err := get(att.NetNS, testnet.Other.String()+":80"); err != nil {
		t.Fatalf("after the rules changed: %v", err)
	}
	if err := m.Update("sb1", ModeEgress, Rules{Allow: []string{"10.0.0.0/8"}, Deny: []string{"0.0.0.0/0"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := get(att.NetNS, testnet.Allowed.String()+":80"); err == nil {
		t.Fatal("deny 0.0.0.0/0: a public address was reachable")
	}

	// Another sandbox: the same addresses inside, its own network.
	att2, err := m.Attach(ctx, "sb2", ModeEgress, Rules{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := get(att2.NetNS, testnet.Allowed.String()+":80"); err != nil {
		t.Fatalf("second sandbox: %v", err)
	}

	// A port inside, reached from the router.
	var inside net.Listener
	if err := nsfile.Run(att2.NetNS, func() (err error) {
		inside, err = net.Listen("tcp4", GuestAddr.String()+":8080")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	go http.Serve(inside, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "inside") }))
	conn, err := m.DialSandbox(ctx, "sb2", 8080)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(conn, "GET / HTTP/1.0\r\n\r\n")
	b, _ := io.ReadAll(conn)
	conn.Close()
	if !strings.Contains(string(b), "inside") {
		t.Fatalf("dial into the sandbox: %q", b)
	}
	inside.Close()

	// Detach leaves nothing behind.
	for _, id := range []string{"sb1", "sb2"} {
		if err := m.Detach(id); err != nil {
			t.Fatal(err)
		}
	}
	if links, _ := hostLinks(m.host.linkPrefix); len(links) > 0 {
		t.Fatalf("links left: %v", links)
	}
	if entries, _ := os.ReadDir(m.cfg.Dir); len(entries) > 1 {
		t.Fatalf("files left: %v", entries)
	}
}

func debugPaths(t *testing.T, m *Manager, id string) {
	dir := filepath.Join(m.cfg.Dir, id)
	run := func(ns string, args ...string) {
		out, _ := exec.Command("nsenter", append([]string{"--net=" + ns}, args...)...).CombinedOutput()
		t.Logf("%s %v:\n%s", filepath.Base(ns), args, out)
	}
	sb, rt := filepath.Join(dir, "sandbox"), filepath.Join(dir, "router")
	run(sb, "ip", "addr")
	run(sb, "ip", "route")
	run(rt, "ip", "addr")
	run(rt, "ip", "route")
	for _, a := range []string{"10.250.250.1", "10.251.64.1", "100.127.255.1", "203.0.113.10"} {
		run(sb, "ping", "-c1", "-W1", a)
	}
	run(rt, "ping", "-c1", "-W1", "203.0.113.10")
	out, _ := exec.Command("ip", "route").CombinedOutput()
	t.Logf("host routes:\n%s", out)
	out, _ = exec.Command("nft", "list", "table", "inet", m.host.name).CombinedOutput()
	t.Logf("host table:\n%s", out)
}
