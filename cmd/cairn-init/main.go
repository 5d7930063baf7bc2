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

	"github.com/cairn-sandbox/cairn/internal/agentauth"
	"github.com/cairn-sandbox/cairn/internal/initd"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	// First of all, before anything holds the key: no other process in
	// the sandbox, root included (it has no CAP_SYS_PTRACE), may read
	// this one's memory, environment or file descriptors through /proc,
	// ptrace or process_vm_readv. Children are dumpable again once they
	// exec.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "cairn-init: make non-dumpable:", err)
		os.Exit(1)
	}
	socket := flag.String("socket", initd.DefaultSocketPath, "host unix socket to dial for cairnd")
	flag.Parse()
	key, err := readKey()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cairn-init:", err)
		os.Exit(1)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "cairn-init")
	cfg := initd.Config{
		SocketPath: *socket,
		Key:        key,
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

// readKey reads the key cairnd gives on standard input (one line of hex,
// see package agentauth) and puts /dev/null in its place, so that nothing
// started later inherits the pipe or finds it in /proc/1/fd/0.
func readKey() (agentauth.Key, error) {
	line, err := agentauth.ReadLine(os.Stdin)
	if err != nil {
		return agentauth.Key{}, fmt.Errorf("no agent key on standard input (cairnd gives one at every boot): %w", err)
	}
	key, err := agentauth.ParseKey(line)
	if err != nil {
		return agentauth.Key{}, err
	}
	null, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return agentauth.Key{}, fmt.Errorf("open /dev/null: %w", err)
	}
	defer unix.Close(null)
	if err := unix.Dup3(null, 0, 0); err != nil {
		return agentauth.Key{}, fmt.Errorf("close the key's pipe: %w", err)
	}
	return key, nil
}
