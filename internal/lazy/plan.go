package lazy

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-sandbox/cairn/internal/repo"
	"github.com/cairn-sandbox/cairn/internal/repo/crypto"
	"github.com/cairn-sandbox/cairn/internal/repo/manifest"
)

// PlanVersion is the version of plan.json this package writes and reads.
const PlanVersion = 1

// Names of the files of a state directory.
const (
	planFile    = "plan.json"
	presentFile = "present"
	socketFile  = "fill.sock"
	pidFile     = "lazyfs.pid"
	logFile     = "lazyfs.log"
	mountDir    = "root"
)

// Plan is what a lazy root has to fill: written once, when the tree is
// laid out, never changed.
type Plan struct {
	Version    int    `json:"version"`
	AccountID  int64  `json:"account_id"` // the account whose repository holds the data
	Checkpoint string `json:"checkpoint"` // the checkpoint restored (its id)
	Manifest   string `json:"manifest"`   // its manifest in the repository
	Backing    string `json:"backing"`    // the laid out tree (the root subvolume), when laid out
	// Subvolume is the btrfs subvolume id of the laid out tree: a root
	// with another id is not this plan's (a restore in place that laid a
	// tree out and never swapped it in), and the state is stale.
	Subvolume uint64 `json:"subvolume,omitempty"`
	// Prefetch is how many of Files, from the first, are there because the
	// checkpoint's sandbox read them first at its last boot (the fill
	// goes in Files' order; docs/lazy-restore.md).
	Prefetch int    `json:"prefetch,omitempty"`
	Bytes    int64  `json:"bytes"` // the data to fill: the sum of the chunks' lengths
	Files    []File `json:"files"`

	slots []slot // every chunk of every file, in order; built by index
}

// File is one regular file with data to fill.
type File struct {
	Path       string   `json:"path"` // where it was laid out; for messages only
	Ino        uint64   `json:"ino"`
	HandleType int32    `json:"handle_type"`
	Handle     []byte   `json:"handle"` // name_to_handle_at's: opens it under any name
	Mtime      int64    `json:"mtime"`  // Unix ns, set again once its data is in
	Extents    []Extent `json:"extents"`
	Chunks     []Chunk  `json:"chunks"`
	First      int      `json:"first"` // the slot of its first chunk
}

// Extent is a data range of a file (manifest.Extent).
type Extent struct {
	Offset uint64 `json:"offset"`
	Length uint64 `json:"length"`
}

// Chunk is one chunk of a file's data, its extents laid end to end.
type Chunk struct {
	ID     string `json:"id"` // 64 hex digits
	Length uint32 `json:"length"`
}

// slot is one chunk of one file: the unit filled, marked in present.
type slot struct {
	file   int
	chunk  int
	stream uint64 // offset of the chunk in the file's extents laid end to end
	id     crypto.ID
}

// NewPlan makes the plan of the files a repo.Layout laid out in backing.
func NewPlan(accountID int64, checkpoint, manifestID, backing string, files []repo.LaidFile) *Plan {
	p := &Plan{Version: PlanVersion, AccountID: accountID, Checkpoint: checkpoint, Manifest: manifestID, Backing: backing}
	for _, lf := range files {
		n := lf.Node
		f := File{Path: n.Path, Ino: lf.Ino, HandleType: lf.Handle.Type(), Handle: lf.Handle.Bytes(), Mtime: n.Mtime, First: 0}
		for _, x := range n.Extents {
			f.Extents = append(f.Extents, Extent{Offset: x.Offset, Length: x.Length})
		}
		for _, c := range n.Chunks {
			f.Chunks = append(f.Chunks, Chunk{ID: c.ID.String(), Length: c.Length})
			p.Bytes += int64(c.Length)
		}
		p.Files = append(p.Files, f)
	}
	return p
}

// index numbers the slots and checks the plan.
func (p *Plan) index() error {
	if p.Version != PlanVersion {
		return fmt.Errorf("plan version %d, not %d", p.Version, PlanVersion)
	}
	p.slots = p.slots[:0]
	var total int64
	for i := range p.Files {
		f := &p.Files[i]
		f.First = len(p.slots)
		var data, stream uint64
		for _, x := range f.Extents {
			data += x.Length
		}
		for j, c := range f.Chunks {
			b, err := hex.DecodeString(c.ID)
			if err != nil || len(b) != len(crypto.ID{}) || c.Length == 0 || c.Length > manifest.MaxChunk {
				return fmt.Errorf("plan: file %d chunk %d is malformed", i, j)
			}
			s := slot{file: i, chunk: j, stream: stream}
			copy(s.id[:], b)
			p.slots = append(p.slots, s)
			stream += uint64(c.Length)
			total += int64(c.Length)
		}
		if stream != data {
			return fmt.Errorf("plan: file %d: chunks hold %d bytes, extents %d", i, stream, data)
		}
	}
	if total != p.Bytes {
		return fmt.Errorf("plan: chunks hold %d bytes, the plan says %d", total, p.Bytes)
	}
	if p.Prefetch < 0 || p.Prefetch > len(p.Files) {
		return fmt.Errorf("plan: %d files to prefetch of %d", p.Prefetch, len(p.Files))
	}
	return nil
}

// Slots is the number of chunks to fill.
func (p *Plan) Slots() int { return len(p.slots) }

// SlotLength is the length of slot i's chunk.
func (p *Plan) SlotLength(i int) int64 {
	s := p.slots[i]
	return int64(p.Files[s.file].Chunks[s.chunk].Length)
}

// SlotID is the chunk id of slot i.
func (p *Plan) SlotID(i int) crypto.ID { return p.slots[i].id }

// WritePlan writes p into the state directory dir (created), durably:
// a temporary file, fsynced, renamed, the directory fsynced. The present
// file is made at the same time, all zeros.
func WritePlan(dir string, p *Plan) error {
	if err := p.index(); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if err := writeDurably(filepath.Join(dir, presentFile), make([]byte, len(p.slots))); err != nil {
		return err
	}
	return writeDurably(filepath.Join(dir, planFile), b)
}

// ReadPlan reads the plan of the state directory dir.
func ReadPlan(dir string) (*Plan, error) {
	b, err := os.ReadFile(filepath.Join(dir, planFile))
	if err != nil {
		return nil, err
	}
	var p Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("plan %s: %w", dir, err)
	}
	if err := p.index(); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return &p, nil
}

// writeDurably writes b to path through a temporary file, renamed.
func writeDurably(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Present reads which slots of the state directory dir are durably
// filled (one byte per slot, 1 when filled) and sums what they hold.
func Present(dir string, p *Plan) (have []bool, bytes int64, err error) {
	b, err := os.ReadFile(filepath.Join(dir, presentFile))
	if err != nil {
		return nil, 0, err
	}
	if len(b) != len(p.slots) {
		return nil, 0, fmt.Errorf("%s: present has %d entries for %d chunks", dir, len(b), len(p.slots))
	}
	have = make([]bool, len(b))
	for i, v := range b {
		if v == 1 {
			have[i] = true
			bytes += p.SlotLength(i)
		} else if v != 0 {
			return nil, 0, fmt.Errorf("%s: present entry %d is %d", dir, i, v)
		}
	}
	return have, bytes, nil
}

// ErrNoState is returned for a directory holding no lazy state.
var ErrNoState = errors.New("no lazy restore state")

// HasState reports whether dir holds the state of a lazy root.
func HasState(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, planFile))
	return err == nil
}
