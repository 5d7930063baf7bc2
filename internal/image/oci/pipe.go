package oci

import (
	"errors"
	"io"
	"sync"
)

// A chunkPipe reads its source on a goroutine of its own, in chunks, up
// to depth chunks ahead of its reader: the stages of a layer's reading
// (fetching and hashing the compressed stream, decompressing and hashing
// it, applying it) run beside one another, each on its own core when
// there is one, without a hand-off per small read as io.Pipe has.
type chunkPipe struct {
	full chan []byte // filled chunks, in order; closed after the last
	free chan []byte // chunks to fill
	held []byte      // the chunk being read (its whole buffer)
	cur  []byte      // what is left of it
	err  error       // the source's error (nil at its end), set before full is closed
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// errPipeClosed is what the source's goroutine ends with when the reader
// closed the pipe first.
var errPipeClosed = errors.New("read of the layer stopped")

// newChunkPipe starts reading src into chunks of size bytes, at most
// depth ahead. Close must be called, and waits for the goroutine.
func newChunkPipe(src io.Reader, size, depth int) *chunkPipe {
	p := &chunkPipe{
		full: make(chan []byte, depth),
		free: make(chan []byte, depth+1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	for range depth + 1 {
		p.free <- make([]byte, size)
	}
	go p.fill(src)
	return p
}

func (p *chunkPipe) fill(src io.Reader) {
	defer close(p.done)
	defer close(p.full)
	for {
		var buf []byte
		select {
		case buf = <-p.free:
		case <-p.stop:
			p.err = errPipeClosed
			return
		}
		n := 0
		var err error
		for n < len(buf) && err == nil {
			var k int
			k, err = src.Read(buf[n:])
			n += k
		}
		if n > 0 {
			// Never blocks: of the depth+1 chunks, this is one and the
			// reader may hold another.
			p.full <- buf[:n]
		}
		if err != nil {
			if err != io.EOF {
				p.err = err
			}
			return
		}
	}
}

// Read reads what the source gave, in order, then its error (io.EOF at
// its end).
func (p *chunkPipe) Read(b []byte) (int, error) {
	for len(p.cur) == 0 {
		if p.held != nil {
			p.free <- p.held[:cap(p.held)]
			p.held = nil
		}
		c, ok := <-p.full
		if !ok {
			if p.err != nil {
				return 0, p.err
			}
			return 0, io.EOF
		}
		p.held, p.cur = c, c
	}
	n := copy(b, p.cur)
	p.cur = p.cur[n:]
	return n, nil
}

// Close stops the source's goroutine, once it is out of the source's
// Read (the caller ends a stalled one by cancelling what it reads), and
// waits for it to end. A Read at the same time, or after, returns
// errPipeClosed or what was read before.
func (p *chunkPipe) Close() error {
	p.once.Do(func() { close(p.stop) })
	<-p.done
	return nil
}
