package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/cairn-sandbox/cairn/internal/hosts"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// registerHost records this host among the hosts that share the store
// (package hosts): its name, the address the others reach its API at and
// its certificate's fingerprint, which they pin.
func registerHost(ctx context.Context, cfg Config, store metadata.Store, locks hosts.Locks, id string, remote *remoteTLS) (*hosts.Registry, error) {
	name := cfg.HostName
	if name == "" {
		n, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("this host's name (give one with --host-name): %w", err)
		}
		name = n
		if metadata.ValidateHostName(name) != nil {
			name = "host-" + id // a machine name cairn cannot take
		}
	}
	if err := metadata.ValidateHostName(name); err != nil {
		return nil, fmt.Errorf("--host-name %q: %w", name, err)
	}
	if cfg.HostCapacity < 0 {
		return nil, fmt.Errorf("--host-capacity %d: want 0 (no bound) or more", cfg.HostCapacity)
	}
	self := metadata.Host{ID: id, Name: name, Capacity: cfg.HostCapacity}
	if remote != nil {
		self.APIAddress = advertised(cfg)
		self.TLSFingerprint = remote.fingerprint()
	} else if cfg.Advertise != "" {
		return nil, fmt.Errorf("--advertise is the address of --listen: give --listen too")
	}
	if locks != nil && self.APIAddress == "" {
		slog.Warn("hosts: this host has no API address the others can reach (--listen with an address, or --advertise): requests for its sandboxes made on other hosts fail", "host", name)
	}
	r, err := hosts.Register(ctx, hosts.Config{Store: store, Self: self, Locks: locks})
	if err != nil {
		return nil, err
	}
	if locks != nil {
		slog.Info("hosts: registered", "host", name, "id", id, "api", self.APIAddress)
	}
	return r, nil
}

// advertised is the ADDR:PORT the other hosts dial: --advertise, else
// --listen's when it names an address and a port.
func advertised(cfg Config) string {
	if cfg.Advertise != "" {
		return cfg.Advertise
	}
	host, port, err := net.SplitHostPort(cfg.Listen)
	if err != nil || port == "0" {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return ""
	}
	return cfg.Listen
}
