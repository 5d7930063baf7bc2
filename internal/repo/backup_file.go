package repo

// A file's chunks: the parent's, for what it still shares with the
// parent's copy of the file, and new ones for the rest.

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/hosttree"
	"github.com/cairn-sandbox/cairn/internal/repo/chunker"
	"github.com/cairn-sandbox/cairn/internal/repo/fiemap"
	"github.com/cairn-sandbox/cairn/internal/repo/manifest"
)

// file fills in the extents and chunks of a regular file, reusing the
// parent's when the file is unchanged and its chunks are stored, and the
// parent's chunks over the ranges it still shares with the parent's file
// when it changed (see sharedWithParent).
func (b *backupRun) file(e *hosttree.Entry, n *manifest.Node) error {
	old := b.parent[n.Path]
	if old != nil && old.Size == n.Size && old.Mtime == n.Mtime &&
		old.Ctime == n.Ctime && old.Inode == n.Inode && b.allKnown(old.Chunks) {
		n.Extents, n.Chunks = old.Extents, old.Chunks
		b.stats.ChunksReused += len(old.Chunks)
		return nil
	}
	f, err := e.Dir.OpenFile(e.Name, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	p := hosttree.Quote(e.Path)
	if err := sameFile(f, &e.Stat); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	ext, err := dataExtents(f, int64(n.Size))
	if err != nil {
		return err
	}
	n.Extents = ext
	if b.chunker == nil {
		if b.chunker, err = chunker.New(nil, b.r.keys.ChunkerKey()); err != nil {
			return err
		}
	}
	var done uint64
	if shared := b.sharedWithParent(f, old, ext); shared != nil {
		done, err = b.chunkChanged(f, n, old, shared)
	} else {
		done, err = b.chunkFrom(f, n, 0, nil)
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", p, err)
	}
	if done != n.DataSize() {
		return fmt.Errorf("%s changed while it was read (%d bytes read, %d expected)", p, done, n.DataSize())
	}
	b.stats.FilesRead++
	return nil
}

// chunkFrom chunks n's data (the back-to-back extents of f) from stream
// offset from, which must be a cut, appending the chunks to n.Chunks and
// queueing the new ones, until the end or until stop, called after each
// chunk with the offset past it, says so. It returns the bytes it chunked.
func (b *backupRun) chunkFrom(f *os.File, n *manifest.Node, from uint64, stop func(pos uint64) bool) (uint64, error) {
	src := &countingReader{r: streamReader(f, n.Extents, from)}
	b.chunker.Reset(src)
	var read uint64
	for {
		chunk, err := b.chunker.Next()
		b.stats.BytesRead += src.take() // with the chunker's read-ahead
		if err == io.EOF {
			return read, nil
		}
		if err != nil {
			return read, err
		}
		read += uint64(len(chunk))
		b.report()
		id := b.r.keys.ChunkID(chunk)
		n.Chunks = append(n.Chunks, manifest.Chunk{ID: id, Length: uint32(len(chunk))})
		if b.known(id) {
			b.stats.ChunksReused++
		} else if err := b.add(id, chunk); err != nil {
			return read, err
		}
		if stop != nil && stop(from+read) {
			return read, nil
		}
	}
}

// chunkChanged chunks a changed file of the same extent layout as its
// parent old, given the stream ranges it shares with the parent's file on
// disk. The result is the chunk list a full read would give, reading only
// around what changed. FastCDC keeps no state from one chunk to the next:
// where a cut of the parent's starts a chunk whose bytes are all shared,
// and so is the byte after it (FastCDC decides a cut before MaxSize by the
// byte at the cut), and which does not start within MaxSize of the end of
// the shorter file unless both have the same length (the chunker looks
// ahead no further than the end), chunking the new file from that cut ends
// that chunk where the parent's ended. So the parent's chunk is taken unread, and reading
// starts again only at a parent chunk that is not entirely shared, until a
// cut lands on a parent's cut again.
func (b *backupRun) chunkChanged(f *os.File, n, old *manifest.Node, shared []fiemap.Range) (uint64, error) {
	newLen, oldLen := n.DataSize(), old.DataSize()
	starts := make([]uint64, len(old.Chunks))
	var off uint64
	for j, c := range old.Chunks {
		starts[j] = off
		off += uint64(c.Length)
	}
	k := 0 // the first shared range that may still cover a chunk
	reusable := func(j int) bool {
		length := uint64(old.Chunks[j].Length)
		start, end := starts[j], starts[j]+length
		if end > newLen || (oldLen != newLen && start+chunker.MaxSize > min(oldLen, newLen)) {
			return false
		}
		// A cut before MaxSize is decided by the byte at the cut too.
		through := end
		if length < chunker.MaxSize && end < newLen {
			through++
		}
		for k < len(shared) && shared[k].End() <= start {
			k++
		}
		return k < len(shared) && shared[k].Offset <= start && through <= shared[k].End() && b.known(old.Chunks[j].ID)
	}
	j := 0 // the first parent chunk not before pos
	atReusable := func(pos uint64) bool {
		for j < len(starts) && starts[j] < pos {
			j++
		}
		return j < len(starts) && starts[j] == pos && reusable(j)
	}
	var pos uint64
	for pos < newLen {
		if atReusable(pos) {
			c := old.Chunks[j]
			n.Chunks = append(n.Chunks, c)
			b.stats.ChunksReused++
			b.stats.BytesShared += int64(c.Length)
			pos += uint64(c.Length)
			continue
		}
		read, err := b.chunkFrom(f, n, pos, atReusable)
		pos += read
		if err != nil || read == 0 {
			return pos, err
		}
	}
	return pos, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64 // since the last take
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// take returns the bytes read since it was last called.
func (c *countingReader) take() int64 {
	n := c.n
	c.n = 0
	return n
}

// sharedWithParent returns the stream ranges (offsets in the back-to-back
// extents) in which the file f, with data extents ext, shares its disk
// bytes with the parent's file old, or nil if that cannot be known: no
// parent directory or not one btrfs with the tree, no parent file, a parent
// file that is not the one the parent manifest describes (size, times,
// inode), or extent layouts (holes) that differ other than in the length
// of the last extent.
func (b *backupRun) sharedWithParent(f *os.File, old *manifest.Node, ext []manifest.Extent) []fiemap.Range {
	if old == nil || b.parentDir == nil || len(old.Chunks) == 0 || !sameLayout(old.Extents, ext) {
		return nil
	}
	fd, err := hosttree.OpenBeneath(b.parentDir, old.Path, os.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil
	}
	pf := os.NewFile(uintptr(fd), old.Path)
	defer pf.Close()
	var st unix.Stat_t
	if unix.Fstat(int(pf.Fd()), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || uint64(st.Size) != old.Size ||
		st.Mtim.Nano() != old.Mtime || st.Ctim.Nano() != old.Ctime || st.Ino != old.Inode {
		return nil
	}
	mine, err := fiemap.Extents(f)
	if err != nil {
		return nil
	}
	theirs, err := fiemap.Extents(pf)
	if err != nil {
		return nil
	}
	return toStream(fiemap.Shared(mine, theirs), ext)
}

// sameLayout reports whether two files' data extents map stream offsets to
// the same file offsets wherever both have data: the same extents, but for
// the last one's length.
func sameLayout(a, b []manifest.Extent) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Offset != b[i].Offset || (a[i].Length != b[i].Length && i != len(a)-1) {
			return false
		}
	}
	return true
}

// toStream maps ranges of file offsets to the stream offsets of a file
// with data extents ext (the file read back to back, holes left out),
// merging neighbours.
func toStream(file []fiemap.Range, ext []manifest.Extent) []fiemap.Range {
	var out []fiemap.Range
	var base uint64 // stream offset of ext[i]
	i := 0
	for _, r := range file {
		for i < len(ext) && ext[i].Offset+ext[i].Length <= r.Offset {
			base += ext[i].Length
			i++
		}
		for e, sb := i, base; e < len(ext) && ext[e].Offset < r.End(); e++ {
			lo, hi := max(r.Offset, ext[e].Offset), min(r.End(), ext[e].Offset+ext[e].Length)
			if lo < hi {
				s := fiemap.Range{Offset: sb + lo - ext[e].Offset, Length: hi - lo}
				if k := len(out) - 1; k >= 0 && out[k].End() == s.Offset {
					out[k].Length += s.Length
				} else {
					out = append(out, s)
				}
			}
			sb += ext[e].Length
		}
	}
	return out
}
