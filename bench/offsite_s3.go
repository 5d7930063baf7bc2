package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// s3Server is one versitygw (posix backend over a directory of the bench's
// temp dir) on loopback, reached through a counting proxy: clients talk to
// proxy.addr, and the proxy counts what crosses it.
type s3Server struct {
	dir       string // versitygw's root: one subdirectory per bucket, one file per object
	addr      string // versitygw itself
	accessKey string
	secretKey string
	cmd       *exec.Cmd
	exited    chan struct{}
	proxy     *countingProxy
}

// startS3Server starts versitygw over dir and a proxy in front of it.
func startS3Server(ctx context.Context, dir string) (*s3Server, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	s := &s3Server{dir: dir, addr: addr, accessKey: "cairnbench", secretKey: hex.EncodeToString(secret)}
	s.cmd = exec.Command("versitygw", "--port", addr, "--quiet", "posix", dir)
	s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.accessKey, "ROOT_SECRET_KEY="+s.secretKey)
	logf, err := os.Create(dir + ".log")
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	// Own process group: a ^C meant for the bench must not stop it
	// before the bench is done with it; stop ends it by its pid.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	s.exited = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("versitygw exited at start (%v): see %s.log", s.cmd.ProcessState, dir)
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("versitygw did not listen on %s: %w", addr, err)
		}
	}
	if s.proxy, err = startProxy(addr); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// stop ends the proxy and the versitygw this bench started (by its pid) and
// waits for it to exit. The directory stays; the caller removes it.
func (s *s3Server) stop() {
	if s.proxy != nil {
		s.proxy.close()
	}
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// cpu is the user+system CPU time versitygw has used so far.
func (s *s3Server) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces): state is
	// field 3, utime and stime are fields 14 and 15, in clock ticks.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on Linux.
const clockTicks = 100

// endpoint is where clients connect: the proxy.
func (s *s3Server) endpoint() string { return s.proxy.addr }

func (s *s3Server) makeBucket(ctx context.Context, bucket string) error {
	c, err := minio.New(s.addr, &minio.Options{
		Creds:        credentials.NewStaticV4(s.accessKey, s.secretKey, ""),
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		return err
	}
	if err := c.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		return fmt.Errorf("make bucket %s: %w", bucket, err)
	}
	return nil
}

// removeBucket deletes a bucket and its objects behind the server's back
// (versitygw's posix backend keeps nothing about it elsewhere).
func (s *s3Server) removeBucket(bucket string) error {
	return os.RemoveAll(filepath.Join(s.dir, bucket))
}

// stored is what a bucket holds: the sum of its objects' sizes (versitygw's
// posix backend stores each object as one file of that size; its metadata
// lives in extended attributes), how many there are, and the bytes by the
// first part of their names (cairn's packs/, index/…, after its prefix;
// restic's data/, index/…).
type stored struct {
	bytes   int64
	objects int
	byKind  map[string]int64
}

// cairnPrefix is the random per-account prefix cairn's objects are under.
const cairnPrefix = "b7c1e0d2f9a8"

func (s *s3Server) bucketSize(bucket string) (stored, error) {
	st := stored{byKind: map[string]int64{}}
	root := filepath.Join(s.dir, bucket)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st.bytes += info.Size()
		st.objects++
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		kind, _, _ := strings.Cut(strings.TrimPrefix(rel, cairnPrefix+"/"), "/")
		st.byKind[kind] += info.Size()
		return nil
	})
	return st, err
}

func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// countingProxy forwards TCP connections from addr to an upstream and
// counts the bytes in each direction.
type countingProxy struct {
	addr     string
	upstream string
	ln       net.Listener
	up, down atomic.Int64 // client→server, server→client

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
}

func startProxy(upstream string) (*countingProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &countingProxy{addr: ln.Addr().String(), upstream: upstream, ln: ln, conns: map[net.Conn]bool{}}
	p.wg.Go(p.accept)
	return p, nil
}

// sent returns the bytes sent client→server and server→client so far.
func (p *countingProxy) sent() (up, down int64) { return p.up.Load(), p.down.Load() }

func (p *countingProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(c) {
			c.Close()
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

// track remembers c so that close can end it; false once closed.
func (p *countingProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = true
	return true
}

func (p *countingProxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

func (p *countingProxy) serve(client net.Conn) {
	defer p.untrack(client)
	defer client.Close()
	server, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return
	}
	if !p.track(server) {
		server.Close()
		return
	}
	defer p.untrack(server)
	defer server.Close()
	var wg sync.WaitGroup
	wg.Go(func() { pipe(server, client, &p.up) })
	pipe(client, server, &p.down)
	wg.Wait()
}

// pipe copies src to dst, counting, then half-closes dst so that the other
// side sees the end of the stream.
func pipe(dst, src net.Conn, n *atomic.Int64) {
	buf := make([]byte, 256<<10)
	_, _ = io.CopyBuffer(countingWriter{dst, n}, src, buf)
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	} else {
		_ = dst.Close()
	}
}

type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// close stops accepting, ends every connection and waits for the copies.
func (p *countingProxy) close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		fmt.Fprintln(os.Stderr, "bench: proxy:", err)
	}
	p.wg.Wait()
}
