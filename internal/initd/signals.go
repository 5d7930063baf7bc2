package initd

import (
	"context"
	"os"

	"golang.org/x/sys/unix"
)

// forwarded are the signals cairn-init passes on to the process groups it
// started.
var forwarded = []os.Signal{unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGUSR1, unix.SIGUSR2}

// forwardSignals passes the signals from sigs on to the process groups
// cairn-init started. SIGTERM ends everything (see terminate) and Run.
func (s *server) forwardSignals(ctx context.Context, sigs <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case got := <-sigs:
			sig := got.(unix.Signal)
			s.log.Info("signal received", "signal", unix.SignalName(sig))
			if sig == unix.SIGTERM {
				s.exit(true) // cairnd stops a sandbox through the shutdown op
				s.terminate(s.cfg.TermGrace)
				s.stop()
				return
			}
			s.groups.signal(sig)
		}
	}
}
