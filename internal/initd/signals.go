package initd

import (
	"context"
	"os"
	"os/signal"

	"golang.org/x/sys/unix"
)

// forwardSignals passes the signals cairn-init receives on to the process
// groups it started. SIGTERM ends everything: see terminate.
func (s *server) forwardSignals(ctx context.Context) {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGUSR1, unix.SIGUSR2)
	defer signal.Stop(sigs)
	for {
		select {
		case <-ctx.Done():
			return
		case got := <-sigs:
			sig := got.(unix.Signal)
			s.log.Info("signal received", "signal", unix.SignalName(sig))
			if sig == unix.SIGTERM {
				s.terminate(s.cfg.TermGrace)
				s.stop()
				return
			}
			s.groups.signal(sig)
		}
	}
}
