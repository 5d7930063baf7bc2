package main

import (
	"context"
	"fmt"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
)

// benchRemote measures the API over HTTPS with a token (cairnd --listen,
// its self-signed certificate pinned) against the unix socket, in the
// same run: GET /v1/sandboxes, and an exec true round trip (a new TLS
// connection each, as exec upgrades it).
func benchRemote(ctx context.Context, e *env) error {
	info, err := e.c.ServerInfo(ctx)
	if err != nil {
		return err
	}
	if info.Listen == "" {
		return fmt.Errorf("the bench's cairnd has no --listen")
	}
	tok, err := e.c.CreateToken(ctx, api.CreateTokenRequest{Name: fmt.Sprintf("bench-%d", time.Now().UnixNano()), Role: "member"})
	if err != nil {
		return err
	}
	defer e.c.RevokeToken(context.WithoutCancel(ctx), tok.Info.ID)
	remote, err := client.NewRemote(client.Remote{URL: info.Listen, Token: tok.Token, Fingerprint: info.TLSFingerprint})
	if err != nil {
		return err
	}
	// Warm both (the first HTTPS request pays the handshake once).
	for _, c := range []*client.Client{e.c, remote} {
		if _, err := c.Sandboxes(ctx, ""); err != nil {
			return err
		}
	}
	n := e.n * 10
	list := func(c *client.Client) ([]time.Duration, error) {
		var ds []time.Duration
		for range n {
			t0 := time.Now()
			if _, err := c.Sandboxes(ctx, ""); err != nil {
				return nil, err
			}
			ds = append(ds, time.Since(t0))
		}
		return ds, nil
	}
	sockList, err := list(e.c)
	if err != nil {
		return err
	}
	httpsList, err := list(remote)
	if err != nil {
		return err
	}
	report("GET /v1/sandboxes over HTTPS with a token (a kept-alive connection)", httpsList, "the same over the unix socket", sockList)
	sp, _ := percentiles(sockList)
	hp, _ := percentiles(httpsList)
	goal(hp-sp <= 2*time.Millisecond, "HTTPS adds %s at p50 to a list (goal ≤ +2ms)", round(hp-sp))
	fmt.Println()

	exec := func(c *client.Client) ([]time.Duration, error) {
		var ds []time.Duration
		for range e.n * 3 {
			t0 := time.Now()
			if err := execTrue(ctx, c, warmSandbox); err != nil {
				return nil, err
			}
			ds = append(ds, time.Since(t0))
		}
		return ds, nil
	}
	sockExec, err := exec(e.c)
	if err != nil {
		return err
	}
	httpsExec, err := exec(remote)
	if err != nil {
		return err
	}
	report("exec true round trip over HTTPS with a token (a TLS handshake each)", httpsExec, "the same over the unix socket", sockExec)
	sp, _ = percentiles(sockExec)
	hp, _ = percentiles(httpsExec)
	goal(hp-sp <= 2*time.Millisecond, "HTTPS adds %s at p50 to an exec (goal ≤ +2ms)", round(hp-sp))
	fmt.Println()
	return nil
}
