package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/network"
	"github.com/cairn-sandbox/cairn/internal/network/nsfile"
)

// benchNetwork measures the sandboxes' networks, each side by side with
// the same thing without cairn in the way:
//   - HTTP through the port proxy (requests/s and p50, one client, one
//     request at a time) against the same server inside the sandbox
//     reached directly from its router namespace;
//   - egress throughput: a sandbox downloading from the test internet's
//     server against the host downloading the same bytes from it;
//   - create+start with networking (mode egress) against without (none).
//
// Everything it reaches is the bench's own test internet (bench daemon).
func benchNetwork(ctx context.Context, e *env) error {
	c, in := e.c, e.d.internet
	fmt.Printf("== network: %d iterations each\n\n", e.n)

	const web = "netweb"
	if err := createSandboxReq(ctx, c, api.CreateSandboxRequest{Name: web, AutoCheckpoint: "24h",
		Network: &api.NetworkChange{Mode: "egress"}}); err != nil {
		return err
	}
	defer deleteSandbox(context.WithoutCancel(ctx), c, web)
	// A 1 KiB page from busybox httpd, which answers one request per
	// connection: both paths pay the same connect inside.
	if _, err := execSh(ctx, c, web, "mkdir -p /www && head -c 1024 /dev/zero | tr '\\0' x > /www/index.html"); err != nil {
		return err
	}
	if _, err := c.ExecDetached(ctx, web, api.ExecRequest{Command: []string{"httpd", "-f", "-p", "8080", "-h", "/www"}}); err != nil {
		return err
	}
	port, err := c.PublishPort(ctx, web, api.PublishPortRequest{Port: 8080, Public: true})
	if err != nil {
		return err
	}
	sb, err := c.Sandbox(ctx, web)
	if err != nil {
		return err
	}
	router := filepath.Join(e.d.dataDir, "net", sb.Container, "router")
	direct := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var conn net.Conn
			err := nsfile.Run(router, func() (err error) {
				conn, err = (&net.Dialer{}).DialContext(ctx, "tcp4", netip.AddrPortFrom(network.GuestAddr, 8080).String())
				return err
			})
			return conn, err
		}}}
	proxied := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	if err := waitHTTP(ctx, direct, "http://sandbox/"); err != nil {
		return err
	}
	requests := e.n * 50
	viaProxy, err := timeRequests(ctx, proxied, port.URL, requests, hostHeader(port.URL))
	if err != nil {
		return fmt.Errorf("through the proxy: %w", err)
	}
	straight, err := timeRequests(ctx, direct, "http://sandbox/", requests, "")
	if err != nil {
		return fmt.Errorf("directly: %w", err)
	}
	report(fmt.Sprintf("HTTP GET of 1 KiB from busybox httpd inside, %d requests one at a time", requests),
		viaProxy, "the same server, directly from its router namespace", straight)
	fmt.Printf("  requests/s: proxy %.0f, direct %.0f: %.2f× (goal ≥ 0.7×)\n\n",
		perSecond(viaProxy), perSecond(straight), perSecond(viaProxy)/perSecond(straight))

	// Egress throughput.
	const size = 256 << 20
	url := fmt.Sprintf("http://%s/bytes?n=%d", in.Allowed, size)
	var sandboxRuns, hostRuns []time.Duration
	for range max(3, e.n/4) {
		t0 := time.Now()
		if _, err := execSh(ctx, c, web, "wget -q -O /dev/null '"+url+"'"); err != nil {
			return err
		}
		sandboxRuns = append(sandboxRuns, time.Since(t0))
		t0 = time.Now()
		if err := download(ctx, url); err != nil {
			return err
		}
		hostRuns = append(hostRuns, time.Since(t0))
	}
	report("download of 256 MiB from the test internet's server", sandboxRuns, "the host downloading it", hostRuns)
	sp50, _ := percentiles(sandboxRuns)
	hp50, _ := percentiles(hostRuns)
	fmt.Printf("  throughput: sandbox %.0f MiB/s, host %.0f MiB/s: %.2f× (goal ≥ 0.5×)\n\n",
		float64(size)/(1<<20)/sp50.Seconds(), float64(size)/(1<<20)/hp50.Seconds(), hp50.Seconds()/sp50.Seconds())

	// create+start with networking against without.
	var with, without []time.Duration
	for i := range e.n {
		for _, mode := range []string{"egress", "none"} {
			name := fmt.Sprintf("net-%s-%d", mode, i)
			t0 := time.Now()
			if err := createSandboxReq(ctx, c, api.CreateSandboxRequest{Name: name, Network: &api.NetworkChange{Mode: mode}}); err != nil {
				return err
			}
			if err := execTrue(ctx, c, name); err != nil {
				return err
			}
			if mode == "egress" {
				with = append(with, time.Since(t0))
			} else {
				without = append(without, time.Since(t0))
			}
			if err := deleteSandbox(ctx, c, name); err != nil {
				return err
			}
		}
	}
	report("create+start busybox, `true`, with networking (egress)", with, "the same without (mode none)", without)
	wp50, _ := percentiles(with)
	np50, _ := percentiles(without)
	fmt.Printf("  networking adds %s at p50 (goal ≤ +30ms)\n\n", round(wp50-np50))
	return nil
}

func hostHeader(rawURL string) string {
	rest := strings.TrimPrefix(rawURL, "http://")
	host, _, _ := strings.Cut(rest, "/")
	return host
}

// timeRequests GETs url n times, one after another, and returns each
// request's time; host, if not "", is sent as the Host header and the
// connection goes to 127.0.0.1 at its port.
func timeRequests(ctx context.Context, c *http.Client, url string, n int, host string) ([]time.Duration, error) {
	target := url
	if host != "" {
		_, port, _ := net.SplitHostPort(host)
		target = strings.Replace(url, host, "127.0.0.1:"+port, 1)
	}
	var out []time.Duration
	for range n {
		req, err := http.NewRequestWithContext(ctx, "GET", target, nil)
		if err != nil {
			return nil, err
		}
		if host != "" {
			req.Host = host
		}
		t0 := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			return nil, err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			return nil, fmt.Errorf("GET %s: %d %v", url, resp.StatusCode, err)
		}
		out = append(out, time.Since(t0))
	}
	return out, nil
}

func waitHTTP(ctx context.Context, c *http.Client, url string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the server inside did not answer: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func perSecond(ds []time.Duration) float64 {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return float64(len(ds)) / sum.Seconds()
}

// download fetches url from the host and throws it away.
func download(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, bufio.NewReaderSize(resp.Body, 1<<20))
	return err
}
