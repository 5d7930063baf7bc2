package api

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// FileDataWriter sends bytes as FrameFileData frames of at most FileChunk
// bytes, and ends them with a FrameFileEnd frame (End). It is not safe for
// concurrent use.
type FileDataWriter struct {
	w   io.Writer
	buf []byte // 5 header bytes, then up to FileChunk payload bytes
}

// NewFileDataWriter returns a FileDataWriter sending frames to w.
func NewFileDataWriter(w io.Writer) *FileDataWriter {
	return &FileDataWriter{w: w, buf: make([]byte, 5, 5+FileChunk)}
}

// Write buffers p, sending each full frame.
func (fw *FileDataWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		c := copy(fw.buf[len(fw.buf):cap(fw.buf)], p)
		fw.buf = fw.buf[:len(fw.buf)+c]
		p, n = p[c:], n+c
		if len(fw.buf) == cap(fw.buf) {
			if err := fw.Flush(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// ReadFrom sends what r reads until io.EOF, reading into the frame buffer
// itself.
func (fw *FileDataWriter) ReadFrom(r io.Reader) (int64, error) {
	var total int64
	for {
		m, err := r.Read(fw.buf[len(fw.buf):cap(fw.buf)])
		fw.buf = fw.buf[:len(fw.buf)+m]
		total += int64(m)
		if len(fw.buf) == cap(fw.buf) {
			if err := fw.Flush(); err != nil {
				return total, err
			}
		}
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// Flush sends the bytes buffered, if any, as one frame.
func (fw *FileDataWriter) Flush() error {
	if len(fw.buf) == 5 {
		return nil
	}
	fw.buf[0] = byte(FrameFileData)
	binary.BigEndian.PutUint32(fw.buf[1:5], uint32(len(fw.buf)-5))
	_, err := fw.w.Write(fw.buf)
	fw.buf = fw.buf[:5]
	return err
}

// End flushes and sends the FrameFileEnd frame: with cause's text (and
// code) if cause is not nil, saying the bytes sent are not all there are.
func (fw *FileDataWriter) End(cause *AgentResult) error {
	if err := fw.Flush(); err != nil {
		return err
	}
	var res AgentResult
	if cause != nil {
		res = *cause
	}
	b, _ := json.Marshal(res)
	return WriteFrame(fw.w, FrameFileEnd, b)
}

// FileDataError is what a FileDataReader returns when the sender ended its
// data with an error: the bytes read are not the whole file.
type FileDataError struct {
	Msg, Code string
}

func (e *FileDataError) Error() string { return e.Msg }

// ErrFileDataCut is wrapped by the error of a FileDataReader whose stream
// ended before its FrameFileEnd frame.
var ErrFileDataCut = errors.New("file data cut short")

// FileDataReader reads the bytes of FrameFileData frames until the
// FrameFileEnd frame: then io.EOF, or a *FileDataError if the sender
// ended with one. A stream that ends before is an error wrapping
// ErrFileDataCut.
type FileDataReader struct {
	r    io.Reader
	left int   // bytes of the current data frame not yet read
	err  error // set once the end is read
}

// NewFileDataReader returns a FileDataReader of the frames r reads.
func NewFileDataReader(r io.Reader) *FileDataReader { return &FileDataReader{r: r} }

// Read implements io.Reader, reading the payload into b directly.
func (fr *FileDataReader) Read(b []byte) (int, error) {
	for fr.left == 0 {
		if fr.err != nil {
			return 0, fr.err
		}
		var hdr [5]byte
		if _, err := io.ReadFull(fr.r, hdr[:]); err != nil {
			return 0, fmt.Errorf("%w: %w", ErrFileDataCut, err)
		}
		n := int(binary.BigEndian.Uint32(hdr[1:5]))
		if n > MaxFramePayload {
			return 0, ErrFrameTooLarge
		}
		switch FrameType(hdr[0]) {
		case FrameFileData:
			fr.left = n
		case FrameFileEnd:
			payload := make([]byte, n)
			if _, err := io.ReadFull(fr.r, payload); err != nil {
				return 0, fmt.Errorf("%w: %w", ErrFileDataCut, err)
			}
			var res AgentResult
			if err := json.Unmarshal(payload, &res); err != nil {
				return 0, fmt.Errorf("file data end: %w", err)
			}
			fr.err = io.EOF
			if res.Error != "" {
				fr.err = &FileDataError{Msg: res.Error, Code: res.Code}
			}
		default:
			return 0, fmt.Errorf("file data: unexpected frame type %d", hdr[0])
		}
	}
	m, err := fr.r.Read(b[:min(len(b), fr.left)])
	fr.left -= m
	if err != nil && (fr.left > 0 || !errors.Is(err, io.EOF)) {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return m, fmt.Errorf("%w: %w", ErrFileDataCut, err)
	}
	return m, nil
}
