// Command cairn-init is PID 1 of every cairn sandbox: it reaps, forwards
// signals and runs the commands cairnd asks for. See package initd.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/initd"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	socket := flag.String("socket", initd.DefaultSocketPath, "host unix socket to dial for cairnd")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "cairn-init")
	cfg := initd.Config{
		SocketPath: *socket,
		IsInit:     os.Getpid() == 1,
		Env:        os.Environ(), // from the sandbox spec
		Version:    version,
		Log:        log,
	}
	// The sandbox's memory limit, for the OOM killer (see initd/oom.go).
	if v, err := strconv.ParseInt(os.Getenv("CAIRN_MEMORY_LIMIT"), 10, 64); err == nil && v > 0 {
		cfg.MemoryLimit = v
	}
	if cfg.IsInit {
		// cairn-init keeps CAP_SYS_ADMIN for itself (to give a copy resumed
		// from another sandbox's memory its own hostname); nothing it
		// starts gets it.
		// The bounding set is per thread: drop it on all of them.
		if _, _, errno := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_CAPBSET_DROP, unix.CAP_SYS_ADMIN, 0); errno != 0 {
			log.Warn("drop CAP_SYS_ADMIN from the bounding set", "err", errno)
		}
	}
	if err := initd.Run(context.Background(), cfg); err != nil {
		fmt.Fprintln(os.Stderr, "cairn-init:", err)
		os.Exit(1)
	}
}
