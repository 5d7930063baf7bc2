package repo

import (
	"context"
	"fmt"
	"os"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/hosttree"
	"github.com/cairn-sandbox/cairn/internal/repo/crypto"
	"github.com/cairn-sandbox/cairn/internal/repo/manifest"
	"github.com/cairn-sandbox/cairn/internal/repo/pack"
)

// LaidFile is a regular file of a Layout: the node of the manifest and
// the file's identity in the tree laid out, to find it again whatever
// name it has by then.
type LaidFile struct {
	Node   *manifest.Node
	Ino    uint64
	Handle unix.FileHandle // name_to_handle_at's, to open it by
}

// Layout lays checkpoint ref's tree out in dstDir (created if missing,
// empty) without the files' data: directories, symbolic links, hard
// links, special files, owners, modes, xattrs and times as Restore makes
// them, every regular file a hole of its final size. It returns the
// regular files with data (the ones Chunks must fill), in manifest order;
// their data is fetched with LoadChunks and written at their extents.
// Every chunk the files name is known to be in a pack. On error dstDir
// holds a partial tree that the caller should remove.
func (r *Repository) Layout(ctx context.Context, ref ManifestRef, dstDir string) ([]LaidFile, error) {
	plain, err := r.loadManifest(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("layout: %w", err)
	}
	m, err := manifest.Decode(plain)
	if err != nil {
		return nil, fmt.Errorf("layout: manifest %s: %w", ref.ID, err)
	}
	r.mu.Lock()
	for i := range m.Nodes {
		for _, c := range m.Nodes[i].Chunks {
			if _, ok := r.blobs[c.ID]; !ok {
				r.mu.Unlock()
				return nil, fmt.Errorf("layout: %s: chunk %s is in no pack", hosttree.Quote(m.Nodes[i].Path), c.ID)
			}
		}
	}
	r.mu.Unlock()
	if err := os.MkdirAll(dstDir, 0o700); err != nil {
		return nil, fmt.Errorf("layout: %w", err)
	}
	if entries, err := os.ReadDir(dstDir); err != nil || len(entries) > 0 {
		return nil, fmt.Errorf("layout: %s is not an empty directory (%v)", dstDir, err)
	}
	root, err := hosttree.OpenRoot(dstDir)
	if err != nil {
		return nil, fmt.Errorf("layout: %w", err)
	}
	defer root.Close()
	dirs := &parentDirs{root: root}
	defer dirs.close()
	var files []LaidFile
	for i := range m.Nodes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n := &m.Nodes[i]
		dir, name, err := dirs.of(n.Path)
		if err == nil {
			err = makeNode(root, dir, name, n)
		}
		if err != nil {
			return nil, fmt.Errorf("layout: %w", err)
		}
		if n.Type != manifest.File || len(n.Chunks) == 0 {
			continue
		}
		f := LaidFile{Node: n}
		dfd, err := dir.Fd()
		if err != nil {
			return nil, fmt.Errorf("layout: %w", err)
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return nil, fmt.Errorf("layout: stat %s: %w", hosttree.Quote(n.Path), err)
		}
		f.Ino = st.Ino
		if f.Handle, _, err = unix.NameToHandleAt(dfd, name, 0); err != nil {
			return nil, fmt.Errorf("layout: file handle of %s: %w", hosttree.Quote(n.Path), err)
		}
		files = append(files, f)
	}
	for i := len(m.Nodes) - 1; i >= 0; i-- {
		n := &m.Nodes[i]
		if n.Type == manifest.Hardlink {
			continue
		}
		dir, name, err := dirs.of(n.Path)
		if err == nil {
			err = applyMeta(dir, name, n)
		}
		if err != nil {
			return nil, fmt.Errorf("layout: %w", err)
		}
	}
	return files, nil
}

// LoadChunks fetches the chunks ids (from the first location with an
// intact copy of each pack), authenticates them and checks them against
// their ids. It returns every chunk asked for, or an error (wrapping
// ErrUnreachable when a location did not answer) and what it got before.
func (r *Repository) LoadChunks(ctx context.Context, ids []crypto.ID) (map[crypto.ID][]byte, error) {
	r.mu.Lock()
	byPack := map[string][]pack.Entry{}
	for _, id := range ids {
		br, ok := r.blobs[id]
		if !ok {
			r.mu.Unlock()
			return nil, fmt.Errorf("chunk %s is in no pack", id)
		}
		byPack[br.pack] = append(byPack[br.pack], br.entry)
	}
	r.mu.Unlock()
	names := make([]string, 0, len(byPack))
	for p := range byPack {
		names = append(names, p)
	}
	slices.Sort(names)
	out := make(map[crypto.ID][]byte, len(ids))
	for _, p := range names {
		data, err := r.loadPack(ctx, p)
		if err != nil {
			return out, err
		}
		for _, e := range byPack[p] {
			plain, err := pack.Blob(r.keys, data, e)
			if err != nil {
				return out, fmt.Errorf("pack %s: %w", p, err)
			}
			out[e.ID] = plain
		}
	}
	return out, nil
}

// PackOf returns the pack holding chunk id and that pack's size, to group
// fetches by pack; false if no pack holds it.
func (r *Repository) PackOf(id crypto.ID) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	br, ok := r.blobs[id]
	return br.pack, ok
}
