// Package pgtest runs a private PostgreSQL server for the tests of one
// package, and gives each test a database of its own on it.
//
// A package's TestMain hands its tests to Main, which stops the server
// (and removes its files) once they are done:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// and a test asks for a database with New:
//
//	url := pgtest.New(t) // postgres://…/t_3?host=/tmp/pgtest-…
//
// The server is Debian's (package postgresql: the binaries under
// /usr/lib/postgresql/VERSION/bin, the newest version found). It starts on
// the first New, so a package whose tests never need it pays nothing. It
// runs from a temporary directory (its data, log and unix socket), listens
// on that socket only (no TCP port that other test runs could collide
// with), trusts local connections, and runs without fsync: durability
// against a power cut is the server's business, not what these tests
// check. initdb and postgres refuse to run as root, so under root they
// run as the user postgres, which owns the directory. The server is the
// test binary's child and dies with it (parent-death signal), so a test
// binary killed or timed out leaves no server behind.
//
// Without PostgreSQL installed New skips the test, or fails it under
// CI=true (see package testenv); a server that is installed but does not
// start fails it.
package pgtest

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// BinGlob is where Debian's postgresql packages put the server's binaries.
const BinGlob = "/usr/lib/postgresql/*/bin"

// errNotInstalled: PostgreSQL is not installed, which skips a test (see
// New); a server that is installed and fails to start fails it.
var errNotInstalled = errors.New("PostgreSQL is not installed")

// serverUser runs the server when the tests run as root.
const serverUser = "postgres"

var (
	mu       sync.Mutex
	inMain   bool
	srv      *server
	startErr error // why the server could not start; sticky
	next     int   // numbers the databases
)

// server is a running postgres.
type server struct {
	dir      string // holds data/, the log and the socket
	bin      string
	cred     *syscall.Credential // the server's user when this process is root; nil: this process's
	postgres *exec.Cmd
	exited   chan struct{} // closed once postgres has exited
	admin    *sql.DB
}

// Main runs the package's tests and then stops the server if one was
// started, and exits with the tests' result. Call it from TestMain.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main for a TestMain that does more: it runs the tests, stops the
// server and returns the exit code, in place of m.Run.
func Run(m *testing.M) int {
	mu.Lock()
	inMain = true
	mu.Unlock()
	code := m.Run()
	mu.Lock()
	if srv != nil {
		if err := srv.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
			if code == 0 {
				code = 1
			}
		}
		srv = nil
	}
	mu.Unlock()
	return code
}

// New returns the URL of a new, empty database on the package's server,
// starting the server first if it is not running. Each call makes another
// database, so tests that need the same one keep the URL.
func New(t testing.TB) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if !inMain {
		t.Fatal("pgtest: the package's TestMain must call pgtest.Main")
	}
	if srv == nil && startErr == nil {
		srv, startErr = start()
	}
	if errors.Is(startErr, errNotInstalled) {
		missing(t, startErr.Error())
	} else if startErr != nil {
		t.Fatalf("pgtest: %v", startErr)
	}
	next++
	name := fmt.Sprintf("t_%d", next)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := srv.admin.ExecContext(ctx, `CREATE DATABASE `+name); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	return srv.url(name)
}

// Serve starts a private server for a program that is not a test (the
// benchmarks) with one empty database, and returns its URL and how to
// stop the server (which removes its directory).
func Serve() (dbURL string, stop func() error, err error) {
	s, err := start()
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.admin.ExecContext(ctx, `CREATE DATABASE bench`); err != nil {
		s.stop()
		return "", nil, fmt.Errorf("pgtest: create database: %w", err)
	}
	return s.url("bench"), s.stop, nil
}

// Dir returns the directory of the running server (its data, log and
// socket), "" if none runs: for tests that want to read its log.
func Dir() string {
	mu.Lock()
	defer mu.Unlock()
	if srv == nil {
		return ""
	}
	return srv.dir
}

func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal("pgtest: " + why)
	}
	t.Skip("pgtest: " + why)
}

// url is the URL of database name on the server: over its unix socket, as
// the user postgres, without a password (the server trusts local users).
func (s *server) url(name string) string {
	q := url.Values{"host": {s.dir}, "sslmode": {"disable"}}
	return (&url.URL{Scheme: "postgres", User: url.User(serverUser), Path: "/" + name, RawQuery: q.Encode()}).String()
}

// Server is a private server started outside of a test binary's TestMain,
// by a program that measures against it (bench): Start it, make databases
// with Database, and Stop it at the end.
type Server struct{ s *server }

// Start starts a private server. With durable the server syncs its
// writes (fsync, full page writes) as a production one does, so that
// what is measured on it includes what a commit costs; without, it runs
// as the tests' does. It also loads pg_stat_statements, so that a
// database made with Database can count the statements run in it
// (Statements).
func Start(durable bool) (*Server, error) {
	extra := []string{"-c", "shared_preload_libraries=pg_stat_statements"}
	if durable {
		extra = append(extra, "-c", "fsync=on", "-c", "full_page_writes=on")
	}
	s, err := start(extra...)
	if err != nil {
		return nil, err
	}
	return &Server{s}, nil
}

// Database makes a new, empty database called name, with
// pg_stat_statements in it, and returns its URL.
func (s *Server) Database(ctx context.Context, name string) (string, error) {
	if _, err := s.s.admin.ExecContext(ctx, `CREATE DATABASE `+name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	db, err := sql.Open("pgx", s.s.url(name))
	if err != nil {
		return "", err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE EXTENSION pg_stat_statements`); err != nil {
		return "", fmt.Errorf("database %s: %w", name, err)
	}
	return s.s.url(name), nil
}

// Statements is how many statements the server has run in database name
// since it started (from pg_stat_statements; its own query included).
func (s *Server) Statements(ctx context.Context, name string) (int64, error) {
	// The view is in the databases that have the extension.
	db, err := sql.Open("pgx", s.s.url(name))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n sql.NullInt64
	err = db.QueryRowContext(ctx,
		`SELECT sum(calls) FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1`, name).Scan(&n)
	return n.Int64, err
}

// Stop stops the server and removes its files.
func (s *Server) Stop() error { return s.s.stop() }

// start initialises a cluster in a new temporary directory and starts it,
// with extra settings (-c NAME=VALUE pairs) after the tests' own.
func start(extra ...string) (*server, error) {
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	removeStale()
	s := &server{bin: bin}
	// A short path: the socket's full name must fit in 107 bytes.
	if s.dir, err = os.MkdirTemp("", "pgtest-"); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup(serverUser)
		if err != nil {
			os.RemoveAll(s.dir)
			return nil, fmt.Errorf("running as root and no user %s to run the server as: %w (%v)", serverUser, errNotInstalled, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(s.dir, uid, gid); err != nil {
			os.RemoveAll(s.dir)
			return nil, err
		}
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	}
	data := filepath.Join(s.dir, "data")
	var out bytes.Buffer
	initdb := s.command("initdb", "--pgdata", data, "--username", serverUser, "--auth", "trust",
		"--encoding", "UTF8", "--no-locale", "--no-sync")
	initdb.Stdout, initdb.Stderr = &out, &out
	if err := initdb.Run(); err != nil {
		os.RemoveAll(s.dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out.Bytes())
	}
	log, err := os.Create(filepath.Join(s.dir, "server.log"))
	if err != nil {
		os.RemoveAll(s.dir)
		return nil, err
	}
	defer log.Close() // the server has its own descriptor
	args := []string{"-D", data, "-c", "listen_addresses=", "-c", "unix_socket_directories=" + s.dir,
		"-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=200"}
	s.postgres = s.command("postgres", append(args, extra...)...)
	s.postgres.Stdout, s.postgres.Stderr = log, log
	// The server dies with the test binary, even one killed or timed out
	// (SIGQUIT: PostgreSQL's immediate shutdown), and no ^C of the
	// terminal's reaches it before the tests have seen it.
	s.postgres.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	s.postgres.SysProcAttr.Setpgid = true
	if err := s.postgres.Start(); err != nil {
		os.RemoveAll(s.dir)
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s.exited = make(chan struct{})
	go func() { s.postgres.Wait(); close(s.exited) }()
	if s.admin, err = sql.Open("pgx", s.url("postgres")); err != nil {
		s.stop()
		return nil, err
	}
	for deadline := time.Now().Add(time.Minute); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = s.admin.PingContext(ctx)
		cancel()
		if err == nil {
			return s, nil
		}
		select {
		case <-s.exited:
			b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
			s.stop()
			return nil, fmt.Errorf("postgres exited at start: %v\n%s", err, b)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("the test server did not answer within a minute: %w", err)
		}
	}
}

// removeStale removes the directories of test servers that are gone (a
// test binary that panicked or was killed cannot remove its own; its
// server died with it): those whose postmaster.pid is missing or names no
// running process, untouched for ten minutes.
func removeStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "pgtest-*"))
	for _, dir := range dirs {
		fi, err := os.Stat(dir)
		if err != nil || time.Since(fi.ModTime()) < 10*time.Minute {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid")); err == nil {
			pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
			if pid > 0 && syscall.Kill(pid, 0) != syscall.ESRCH {
				continue // running, or not ours to judge
			}
		}
		os.RemoveAll(dir)
	}
}

// findBin returns the newest directory of PostgreSQL server binaries.
func findBin() (string, error) {
	dirs, _ := filepath.Glob(BinGlob)
	var found []string
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			found = append(found, d)
		}
	}
	if len(found) == 0 {
		return "", fmt.Errorf("%w: no server in %s (Debian's postgresql: scripts/install-deps.sh --test)", errNotInstalled, BinGlob)
	}
	version := func(d string) int { v, _ := strconv.Atoi(filepath.Base(filepath.Dir(d))); return v }
	sort.Slice(found, func(i, j int) bool { return version(found[i]) < version(found[j]) })
	return found[len(found)-1], nil
}

// command returns the command that runs one of the server's binaries as
// the server's user.
func (s *server) command(tool string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, tool), args...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	return cmd
}

// stop stops the server at once (nothing it holds is kept) and removes
// its directory.
func (s *server) stop() error {
	if s.admin != nil {
		s.admin.Close()
	}
	var err error
	if s.postgres != nil && s.postgres.Process != nil {
		s.postgres.Process.Signal(syscall.SIGQUIT)
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			s.postgres.Process.Kill()
			<-s.exited
			err = errors.New("postgres did not stop within 30s of SIGQUIT: killed")
		}
	}
	if rmErr := os.RemoveAll(s.dir); err == nil {
		err = rmErr
	}
	return err
}
