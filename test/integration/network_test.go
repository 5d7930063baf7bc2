package integration

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/network"
)

// A sandbox reaches the test internet under its rules; what it must never
// reach (the host, the metadata address, private ranges) and what its
// rules deny fail at once; rule changes take effect without a restart;
// nothing of its network is left when it goes.
func TestSandboxNetworkEgressAndRules(t *testing.T) {
	d := startDaemon(t)
	in := d.internet
	d.create("net")

	fetch := func(addr string) (string, error) {
		return d.execOut(30*time.Second, "net", "timeout", "5", "wget", "-q", "-O", "-", "http://"+addr+"/")
	}
	if out, err := fetch(in.Allowed.String()); err != nil || !strings.Contains(out, "hello from "+in.Allowed.String()) {
		t.Fatalf("wget a public address: %q %v", out, err)
	}

	// The host itself: a port open on all its addresses.
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.0 200 OK\r\n\r\nthe host\n"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	never := []string{
		net.JoinHostPort(in.UplinkAddr().String(), itoa(port)), // the host on its uplink
		"169.254.169.254:80", // metadata
		"10.1.2.3:80",        // a private range
		"127.0.0.1:" + itoa(port),
	}
	d.mustCLI("network", "set", "net", "--deny", in.Other.String()+"/32")
	for _, target := range append(never, in.Other.String()+":80") {
		start := time.Now()
		out, err := fetch(target)
		if err == nil {
			t.Errorf("%s was reachable from the sandbox: %q", target, out)
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("%s: refused only after %v (want at once): %v", target, took, err)
		}
	}

	// Rules changed at runtime, no restart.
	d.mustCLI("network", "set", "net", "--clear")
	if out, err := fetch(in.Other.String()); err != nil || !strings.Contains(out, "hello from") {
		t.Fatalf("after --clear: %q %v", out, err)
	}
	d.mustCLI("network", "set", "net", "--deny", "0.0.0.0/0", "--allow", in.Other.String())
	if _, err := fetch(in.Allowed.String()); err == nil {
		t.Fatal("deny 0.0.0.0/0: a public address was reachable")
	}
	if _, err := fetch(in.Other.String()); err != nil {
		t.Fatalf("an allowed address under deny 0.0.0.0/0: %v", err)
	}
	if code := d.errorCode("network", "set", "net", "--allow", "10.0.0.1/8"); code != "N02" {
		t.Errorf("a CIDR with host bits: %s, want N02", code)
	}
	info := d.mustCLI("network", "show", "net")
	for _, want := range []string{"egress", "0.0.0.0/0", in.Other.String(), "10.250.250.2"} {
		if !strings.Contains(info, want) {
			t.Errorf("network show lacks %q:\n%s", want, info)
		}
	}

	// Mode none at runtime: everything refused at once.
	d.mustCLI("network", "set", "net", "--mode", "none", "--clear")
	if _, err := fetch(in.Allowed.String()); err == nil {
		t.Fatal("mode none: a public address was reachable")
	}
	// ... and loopback only after a restart.
	d.mustCLI("restart", "net")
	if out := d.sh("net", "ip addr"); strings.Contains(out, "eth0") {
		t.Fatalf("mode none after a restart: interfaces %q", out)
	}
	d.mustCLI("network", "set", "net", "--mode", "egress")
	d.mustCLI("restart", "net")
	if _, err := fetch(in.Allowed.String()); err != nil {
		t.Fatalf("back to egress after a restart: %v", err)
	}

	// Delete: nothing of its network left on the host.
	d.mustCLI("delete", "net")
	d.checkNoNetworkLeft()
}

// checkNoNetworkLeft fails unless the host holds no namespace, link or
// directory of this cairnd's sandbox networks.
func (d *daemon) checkNoNetworkLeft() {
	d.t.Helper()
	entries, _ := os.ReadDir(filepath.Join(d.dataDir, "net"))
	for _, e := range entries {
		if e.IsDir() {
			d.t.Errorf("network directory left: %s", e.Name())
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), filepath.Join(d.dataDir, "net")+"/") {
		d.t.Errorf("network namespaces still bound under %s", filepath.Join(d.dataDir, "net"))
	}
	// Only this cairnd's links: another run's leftovers are not this one's.
	ours := network.LinkPrefix(filepath.Join(d.dataDir, "net"))
	links, _ := netlink.LinkList()
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, ours) {
			d.t.Errorf("link left: %s", l.Attrs().Name)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// A cairnd killed while networked sandboxes run takes their networks over
// when it starts again (rules, resolver, published ports); the network of
// a container that died meanwhile is swept; and after the deletes nothing
// is left on the host.
func TestNetworkAcrossACairndCrash(t *testing.T) {
	d := startDaemon(t)
	in := d.internet
	d.create("keep", "--deny", "denied.test")
	d.create("gone")
	d.webServer("keep")
	port := d.publish("keep", "--public")
	fetch := func(name, target string) error {
		_, err := d.execOut(30*time.Second, name, "timeout", "5", "wget", "-q", "-O", "-", "http://"+target+"/")
		return err
	}
	var gone api.Sandbox
	json.Unmarshal([]byte(d.mustCLI("--json", "info", "gone")), &gone)

	d.kill(syscall.SIGKILL)
	// While cairnd is down, one sandbox's container dies for good.
	exec.Command("runsc", "--root", filepath.Join(d.dataDir, "runsc"), "delete", "--force", gone.Container).Run()
	d.start()

	if err := fetch("keep", "allowed.test"); err != nil {
		t.Fatalf("outbound by name after the restart (the resolver taken over): %v", err)
	}
	if err := fetch("keep", "denied.test"); err == nil {
		t.Fatal("a denied name resolved after the restart")
	}
	if code, body := viaProxy(t, d.portURL("keep"), ""); code != 200 || !strings.Contains(body, "page of keep") {
		t.Fatalf("the published port after the restart: %d %q", code, body)
	}
	// The dead container's network is gone; the sandbox, started again by
	// its restart policy (or by hand), has a new one that works.
	if _, err := os.Stat(filepath.Join(d.dataDir, "net", gone.Container)); !os.IsNotExist(err) {
		t.Errorf("the network of a container that died while cairnd was down is still there (%v)", err)
	}
	waitRunningAgain(t, d, "gone")
	if err := fetch("gone", in.Allowed.String()); err != nil {
		t.Fatalf("the restarted sandbox's network: %v", err)
	}
	_ = port
	d.mustCLI("delete", "keep")
	d.mustCLI("delete", "gone")
	d.checkNoNetworkLeft()
}

// portURL is the host-form URL of name's published port 8080 now (the
// proxy's port changes with each cairnd start in these tests).
func (d *daemon) portURL(name string) string {
	d.t.Helper()
	var ports []api.Port
	if err := json.Unmarshal([]byte(d.mustCLI("--json", "port", "list", name)), &ports); err != nil || len(ports) == 0 {
		d.t.Fatalf("port list %s: %v %+v", name, err, ports)
	}
	return ports[0].URL
}

// waitRunningAgain waits until sandbox name runs with its cairn-init
// connected (a restart policy at work), starting it if it crashed for
// good.
func waitRunningAgain(t *testing.T, d *daemon, name string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var sb api.Sandbox
		json.Unmarshal([]byte(d.mustCLI("--json", "info", name)), &sb)
		if sb.State == api.StateRunning && sb.AgentConnected {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %s, not running again", name, sb.State)
		}
		time.Sleep(300 * time.Millisecond)
	}
}
