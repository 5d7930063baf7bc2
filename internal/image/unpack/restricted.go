package unpack

import (
	"archive/tar"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// The restricted mode (Options.Restricted) is for a tar a user sent as a
// tree of plain files, a build context, rather than an image layer: it
// takes what a tree of a user's files holds and nothing that could carry
// privilege or reach outside the root.
//
//   - Entry types: regular files, directories and symbolic links only. A
//     hard link, device, FIFO or any other type is refused (ErrNotAllowed;
//     the CLI sends hard links as separate files and leaves the others
//     out), and so is a name like a whiteout (".wh." starting any
//     component): a restricted tree has no layers below it.
//   - Owners: the archive's are ignored; everything made is owned by
//     Restriction.UID:GID (root by default).
//   - Modes: the permission bits and the sticky bit are kept; setuid and
//     setgid are cleared (counted in Stats.SetIDCleared), never refused.
//   - Extended attributes: none applied (file capabilities and ACLs are
//     privilege); they are counted in Stats.XattrsSkipped.
//   - Names: at most Restriction.MaxNameLen bytes and MaxDepth components
//     (ErrLimit past them), valid UTF-8 without control characters (C0,
//     DEL, C1) in the name or a symbolic link's target (ErrNotAllowed):
//     such names are how a terminal is attacked when they are printed.
//   - Symbolic links are made as they are, their targets never read: as in
//     the full mode, no entry is made through one (ErrUnsafe), and a ".."
//     component is refused (ErrUnsafe).
//
// Options.MaxEntries and MaxBytes bound the tree as they bound a layer.

// ErrNotAllowed: an entry a restricted Apply does not take (a hard link,
// device, FIFO, whiteout, or a name with control characters).
var ErrNotAllowed = errors.New("not allowed in this tree")

// Defaults of Restriction's name limits: Linux's PATH_MAX, and a depth
// far past what source trees hold.
const (
	RestrictedMaxNameLen = unix.PathMax
	RestrictedMaxDepth   = 128
)

// Restriction makes an Apply restricted (see above).
type Restriction struct {
	// UID and GID own everything made, whatever the archive says.
	UID, GID uint32
	// MaxNameLen bounds a name's bytes (an entry's, a link's target);
	// 0 is RestrictedMaxNameLen.
	MaxNameLen int
	// MaxDepth bounds a name's components; 0 is RestrictedMaxDepth.
	MaxDepth int
}

func (r *Restriction) maxNameLen() int {
	if r.MaxNameLen > 0 {
		return min(r.MaxNameLen, MaxNameLen)
	}
	return RestrictedMaxNameLen
}

func (r *Restriction) maxDepth() int {
	if r.MaxDepth > 0 {
		return min(r.MaxDepth, MaxDepth)
	}
	return RestrictedMaxDepth
}

// check refuses an entry the restriction does not take, before anything
// of it is made.
func (r *Restriction) check(hdr *tar.Header) error {
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeDir, tar.TypeSymlink, tar.TypeXGlobalHeader:
	case tar.TypeLink:
		return fmt.Errorf("%w: a hard link (send the file itself)", ErrNotAllowed)
	case tar.TypeChar, tar.TypeBlock:
		return fmt.Errorf("%w: a device node", ErrNotAllowed)
	case tar.TypeFifo:
		return fmt.Errorf("%w: a FIFO", ErrNotAllowed)
	default:
		return fmt.Errorf("%w: entry type %q (only files, directories and symbolic links)", ErrNotAllowed, hdr.Typeflag)
	}
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil
	}
	if err := r.checkName(hdr.Name, "name"); err != nil {
		return err
	}
	for c := range strings.SplitSeq(hdr.Name, "/") {
		if strings.HasPrefix(c, whiteoutPrefix) {
			return fmt.Errorf("%w: a name starting with %q (a whiteout's)", ErrNotAllowed, whiteoutPrefix)
		}
	}
	if hdr.Typeflag == tar.TypeSymlink {
		return r.checkName(hdr.Linkname, "symbolic link's target")
	}
	return nil
}

// checkName checks the length, depth and characters of a name (what
// says which name it is).
func (r *Restriction) checkName(name, what string) error {
	if n := len(name); n > r.maxNameLen() {
		return fmt.Errorf("%w: a %s of %d bytes (at most %d)", ErrLimit, what, n, r.maxNameLen())
	}
	if d := depth(name); d > r.maxDepth() {
		return fmt.Errorf("%w: a %s of %d components (at most %d)", ErrLimit, what, d, r.maxDepth())
	}
	if err := PlainName(name); err != nil {
		return fmt.Errorf("a %s: %w", what, err)
	}
	return nil
}

// PlainName checks the characters of a name a restricted Apply takes:
// valid UTF-8 without control characters (C0, DEL, C1). The error wraps
// ErrNotAllowed.
func PlainName(name string) error {
	if !utf8.ValidString(name) {
		return fmt.Errorf("%w: not UTF-8", ErrNotAllowed)
	}
	for _, c := range name {
		if c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) {
			return fmt.Errorf("%w: a control character (%U)", ErrNotAllowed, c)
		}
	}
	return nil
}

// depth is the number of components of a name, empty and "." ones not
// counted.
func depth(name string) int {
	n := 0
	for c := range strings.SplitSeq(name, "/") {
		if c != "" && c != "." {
			n++
		}
	}
	return n
}

// restrict makes m what a restricted Apply sets: its owner, no setuid or
// setgid, no extended attributes.
func (a *applier) restrict(m *meta) {
	r := a.restricted
	m.uid, m.gid = int(r.UID), int(r.GID)
	if m.mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
		m.mode &^= unix.S_ISUID | unix.S_ISGID
		a.stats.SetIDCleared++
	}
	a.stats.XattrsSkipped += len(m.xattrs)
	m.xattrs = nil
}

// parentOwner is the owner of the directories made for entries whose
// parents have no entry of their own: root, or the restriction's owner.
func (a *applier) parentOwner() (int, int) {
	if a.restricted != nil {
		return int(a.restricted.UID), int(a.restricted.GID)
	}
	return 0, 0
}
