package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
	"github.com/cairn-sandbox/cairn/internal/testenv/pgtest"
)

// benchHosts measures forwarding between hosts (docs/several-hosts.md):
// two cairnd, a and b, on one PostgreSQL database of the bench's own; a
// sandbox on a; GET /v1/sandboxes/{name} and an exec true round trip over
// HTTPS with a token through b (forwarded to a) against the same through
// a, in the same run.
func benchHosts(ctx context.Context, e *env) error {
	url, stopPG, err := pgtest.Serve()
	if err != nil {
		return fmt.Errorf("PostgreSQL: %w", err)
	}
	defer stopPG()
	var hosts [2]*benchDaemon
	defer func() {
		for i := len(hosts) - 1; i >= 0; i-- {
			if hosts[i] != nil {
				if err := hosts[i].stop(); err != nil {
					fmt.Fprintln(os.Stderr, "bench: hosts: cleanup:", err)
				}
			}
		}
	}()
	for i, name := range []string{"a", "b"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		listen := ln.Addr().String()
		ln.Close()
		if hosts[i], err = startDaemon(ctx, e.binDir, e.runsc, "--database", url, "--listen", listen, "--host-name", name,
			"--network-range", fmt.Sprintf("10.%d.0.0/24", 250+i)); err != nil {
			return fmt.Errorf("host %s: %w", name, err)
		}
	}
	a := hosts[0]
	if err := createQuiet(ctx, a.client, "far"); err != nil {
		return err
	}
	tok, err := a.client.CreateToken(ctx, api.CreateTokenRequest{Name: "bench-hosts", Role: "member"})
	if err != nil {
		return err
	}
	var remotes [2]*client.Client
	for i, d := range hosts {
		info, err := d.client.ServerInfo(ctx)
		if err != nil {
			return err
		}
		if remotes[i], err = client.NewRemote(client.Remote{URL: info.Listen, Token: tok.Token, Fingerprint: info.TLSFingerprint}); err != nil {
			return err
		}
	}
	// Warm both, and b's connections to a.
	for _, c := range remotes {
		for range 3 {
			if _, err := c.Sandbox(ctx, "far"); err != nil {
				return err
			}
		}
	}
	get := func(c *client.Client) ([]time.Duration, error) {
		var ds []time.Duration
		for range e.n * 10 {
			t0 := time.Now()
			if _, err := c.Sandbox(ctx, "far"); err != nil {
				return nil, err
			}
			ds = append(ds, time.Since(t0))
		}
		return ds, nil
	}
	onA, err := get(remotes[0])
	if err != nil {
		return err
	}
	viaB, err := get(remotes[1])
	if err != nil {
		return err
	}
	report("GET /v1/sandboxes/{name} through host b, forwarded to a", viaB, "the same on a, the sandbox's host", onA)
	ap, _ := percentiles(onA)
	bp, _ := percentiles(viaB)
	goal(bp-ap <= 3*time.Millisecond, "forwarding adds %s at p50 to a GET (goal ≤ +3ms)", round(bp-ap))
	fmt.Println()

	exec := func(c *client.Client) ([]time.Duration, error) {
		var ds []time.Duration
		for range e.n * 3 {
			t0 := time.Now()
			if err := execTrue(ctx, c, "far"); err != nil {
				return nil, err
			}
			ds = append(ds, time.Since(t0))
		}
		return ds, nil
	}
	execA, err := exec(remotes[0])
	if err != nil {
		return err
	}
	execB, err := exec(remotes[1])
	if err != nil {
		return err
	}
	report("exec true round trip through host b, forwarded to a (an upgraded stream)", execB, "the same on a", execA)
	ap, _ = percentiles(execA)
	bp, _ = percentiles(execB)
	goal(bp-ap <= 3*time.Millisecond, "forwarding adds %s at p50 to an exec (goal ≤ +3ms)", round(bp-ap))
	fmt.Println()
	return nil
}
