// Package testnet gives a test an "internet" of its own: a network
// namespace holding HTTP servers and a DNS server at addresses the test
// chose, linked to the host by a veth that cairnd takes as its uplink.
// Nothing a sandbox sends can then leave the machine: cairnd forwards
// only to its uplink, and the host routes the test's addresses into the
// namespace.
package testnet

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/network/nsfile"
)

// The test internet's addresses come from documentation ranges (RFC
// 5737), which nothing real uses and which no default rule of cairn's
// blocks: a /26 of each for each of the slots, so that a few tests (of
// different packages) can have one at the same time.
const slots = 4

var testNet3, testNet2 = [3]byte{203, 0, 113}, [3]byte{198, 51, 100}

func slotAddr(prefix [3]byte, slot, host int) netip.Addr {
	return netip.AddrFrom4([4]byte{prefix[0], prefix[1], prefix[2], byte(slot*64 + host)})
}

// Internet is a test's internet.
type Internet struct {
	// Allowed and Denied are HTTP servers that DNS names point at;
	// Other is reached by address (CIDR rules).
	Allowed, Denied, Other netip.Addr
	// DNS is its name server.
	DNS netip.Addr
	// Routed are the prefixes the host routes into it.
	Routed           []netip.Prefix
	hostSide, nsSide netip.Prefix

	// Uplink is the host's end of the link: cairnd's --network-uplink.
	Uplink string
	// Upstream is the DNS server's IP:PORT: cairnd's --dns-upstream.
	Upstream string
	// Names are the DNS names it answers, and their addresses.
	Names map[string]netip.Addr

	ns    string
	mu    sync.Mutex
	hits  map[netip.Addr]int
	close []func()
}

// New makes a test internet, removed when t ends. Its DNS server answers
// allowed.test, www.allowed.test and denied.test (Allowed, Allowed,
// Denied) and other.test (Other); every server answers GET / with
// "hello from ADDR" and GET /bytes?n=N with N bytes.
func New(t testing.TB) *Internet {
	t.Helper()
	in, err := Start(t.TempDir())
	if err != nil {
		t.Fatalf("test internet: %v", err)
	}
	t.Cleanup(in.Close)
	return in
}

// Start makes a test internet whose namespace is bound in dir (for a
// benchmark, which has no testing.TB); Close removes it.
func Start(dir string) (*Internet, error) {
	lock, slot, err := takeSlot()
	if err != nil {
		return nil, err
	}
	suffix := make([]byte, 2)
	rand.Read(suffix)
	in := &Internet{
		Allowed: slotAddr(testNet3, slot, 10),
		Denied:  slotAddr(testNet3, slot, 20),
		DNS:     slotAddr(testNet3, slot, 53),
		Other:   slotAddr(testNet2, slot, 10),
		Routed: []netip.Prefix{netip.PrefixFrom(slotAddr(testNet3, slot, 0), 26),
			netip.PrefixFrom(slotAddr(testNet2, slot, 0), 26)},
		hostSide: netip.PrefixFrom(netip.AddrFrom4([4]byte{100, 127, byte(255 - slot), 1}), 30),
		nsSide:   netip.PrefixFrom(netip.AddrFrom4([4]byte{100, 127, byte(255 - slot), 2}), 30),
		Uplink:   "ci" + hex.EncodeToString(suffix),
		ns:       filepath.Join(dir, "internet"),
		hits:     map[netip.Addr]int{},
	}
	in.Upstream = netip.AddrPortFrom(in.DNS, 53).String()
	in.Names = map[string]netip.Addr{
		"allowed.test.": in.Allowed, "www.allowed.test.": in.Allowed, "denied.test.": in.Denied, "other.test.": in.Other,
	}
	in.close = append(in.close, func() { lock.Close() })
	if err := in.build(); err != nil {
		in.Close()
		return nil, err
	}
	return in, nil
}

// hostNeeds names the hosts the machine itself must still reach while a
// test internet is up: the Debian mirror the image builds download from.
// A machine may have it at a documentation address (seen: deb.debian.org
// at 203.0.113.80, a local mirror), which a slot's routes would send into
// the test internet.
var hostNeeds = []string{"deb.debian.org"}

// usableSlots reports, by slot, whether its routes leave every address of
// hostNeeds reachable.
func usableSlots() [slots]bool {
	var ok [slots]bool
	var need []netip.Addr
	for _, host := range hostNeeds {
		addrs, _ := net.LookupHost(host)
		for _, a := range addrs {
			if ip, err := netip.ParseAddr(a); err == nil {
				need = append(need, ip.Unmap())
			}
		}
	}
	for slot := range slots {
		ok[slot] = true
		for _, prefix := range [][3]byte{testNet3, testNet2} {
			routed := netip.PrefixFrom(slotAddr(prefix, slot, 0), 26)
			for _, a := range need {
				if routed.Contains(a) {
					ok[slot] = false
				}
			}
		}
	}
	return ok
}

// takeSlot takes the first free slot (waiting for one) that usableSlots
// allows, held by the returned file until it is closed.
func takeSlot() (*os.File, int, error) {
	usable := usableSlots()
	if usable == [slots]bool{} {
		return nil, 0, fmt.Errorf("every slot's routes would cut the machine off from %v", hostNeeds)
	}
	for {
		for slot := range slots {
			if !usable[slot] {
				continue
			}
			f, err := os.OpenFile(fmt.Sprintf("/run/cairn-testnet.%d.lock", slot), os.O_CREATE|os.O_RDWR, 0o600)
			if err != nil {
				return nil, 0, err
			}
			if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
				return f, slot, nil
			}
			f.Close()
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// removeLeftovers deletes the uplink a killed test left for this slot
// (its host-side address, a "ci" name): holding the slot's lock, nothing
// alive owns it, and its routes would make this one's fail.
func (in *Internet) removeLeftovers() {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); !ok || ip.Unmap() != in.hostSide.Addr() {
			continue
		}
		if l, err := netlink.LinkByIndex(a.LinkIndex); err == nil && strings.HasPrefix(l.Attrs().Name, "ci") {
			netlink.LinkDel(l)
		}
	}
}

func (in *Internet) build() error {
	in.removeLeftovers()
	if err := nsfile.New(in.ns); err != nil {
		return err
	}
	in.close = append(in.close, func() { nsfile.Remove(in.ns) })
	fd, err := netns.GetFromPath(in.ns)
	if err != nil {
		return err
	}
	defer fd.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: in.Uplink}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(fd))}
	if err := netlink.LinkAdd(veth); err != nil {
		return err
	}
	in.close = append(in.close, func() {
		if l, err := netlink.LinkByName(in.Uplink); err == nil {
			netlink.LinkDel(l)
		}
	})
	host, err := netlink.LinkByName(in.Uplink)
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(host, addr(in.hostSide)); err != nil {
		return err
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return err
	}
	for _, p := range in.Routed {
		r := &netlink.Route{LinkIndex: host.Attrs().Index, Dst: ipnet(p), Gw: in.nsSide.Addr().AsSlice()}
		if err := netlink.RouteAdd(r); err != nil {
			return fmt.Errorf("route %s: %w", p, err)
		}
	}
	h, err := netlink.NewHandleAt(fd)
	if err != nil {
		return err
	}
	defer h.Close()
	for _, name := range []string{"lo", "eth0"} {
		l, err := h.LinkByName(name)
		if err != nil {
			return err
		}
		if err := h.LinkSetUp(l); err != nil {
			return err
		}
		if name == "eth0" {
			if err := h.AddrAdd(l, addr(in.nsSide)); err != nil {
				return err
			}
		} else {
			for _, a := range []netip.Addr{in.Allowed, in.Denied, in.Other, in.DNS} {
				if err := h.AddrAdd(l, addr(netip.PrefixFrom(a, 32))); err != nil {
					return err
				}
			}
		}
	}
	return nsfile.Run(in.ns, func() error {
		for _, a := range []netip.Addr{in.Allowed, in.Denied, in.Other} {
			l, err := net.Listen("tcp4", netip.AddrPortFrom(a, 80).String())
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: in.handler(a)}
			go srv.Serve(l)
			in.close = append(in.close, func() { srv.Close() })
		}
		pc, err := net.ListenPacket("udp4", in.Upstream)
		if err != nil {
			return err
		}
		go in.serveDNS(pc)
		in.close = append(in.close, func() { pc.Close() })
		return nil
	})
}

// Hits is how many requests the server at a has answered.
func (in *Internet) Hits(a netip.Addr) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.hits[a]
}

// Close removes the namespace, the link and its routes, and stops the
// servers.
func (in *Internet) Close() {
	for i := len(in.close) - 1; i >= 0; i-- {
		in.close[i]()
	}
	in.close = nil
}

// Namespace is the path of the test internet's namespace.
func (in *Internet) Namespace() string { return in.ns }

func (in *Internet) handler(a netip.Addr) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		in.mu.Lock()
		in.hits[a]++
		in.mu.Unlock()
		fmt.Fprintf(w, "hello from %s\n", a)
	})
	mux.HandleFunc("GET /bytes", func(w http.ResponseWriter, r *http.Request) {
		var n int64
		fmt.Sscan(r.URL.Query().Get("n"), &n)
		w.Header().Set("Content-Length", fmt.Sprint(n))
		io.CopyN(w, zeros{}, n)
	})
	return mux
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// serveDNS answers A queries for Names; anything else NXDOMAIN.
func (in *Internet) serveDNS(pc net.PacketConn) {
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		var p dnsmessage.Parser
		hdr, err := p.Start(buf[:n])
		if err != nil {
			continue
		}
		q, err := p.Question()
		if err != nil {
			continue
		}
		name := strings.ToLower(q.Name.String())
		a, known := in.Names[name]
		resp := dnsmessage.Header{ID: hdr.ID, Response: true, Authoritative: true, RecursionDesired: hdr.RecursionDesired, RecursionAvailable: true}
		if !known {
			resp.RCode = dnsmessage.RCodeNameError
		}
		b := dnsmessage.NewBuilder(nil, resp)
		b.EnableCompression()
		b.StartQuestions()
		b.Question(q)
		b.StartAnswers()
		if known && q.Type == dnsmessage.TypeA {
			b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: a.As4()})
		}
		out, err := b.Finish()
		if err == nil {
			pc.WriteTo(out, from)
		}
	}
}

func addr(p netip.Prefix) *netlink.Addr { return &netlink.Addr{IPNet: ipnet(p)} }

func ipnet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)}
}

// UplinkAddr is the host's address on the uplink.
func (in *Internet) UplinkAddr() netip.Addr { return in.hostSide.Addr() }
