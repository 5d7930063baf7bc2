package browse

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/hosttree"
)

// The file system's three kinds of node: rootNode (the mount point, one
// directory per sandbox with a table), sandboxNode (one sandbox's entries)
// and passNode (a file or directory inside an entry, served from the pool).
// Only the operations that read are implemented; go-fuse answers the rest
// with ENOTSUP, and the kernel refuses writes to the read-only mount before
// they reach the server.

// innerTimeout is how long the kernel may cache a name or attributes inside
// an entry. A checkpoint never changes, and an entry that goes away is
// looked up again at once (the names above it are cached for 0 s).
const innerTimeout = time.Second

// pidXattr is the extended attribute of the mount's root that holds the
// server's pid (Stop reads it).
const pidXattr = "user.cairn-browse.pid"

// fileSystem is what every node shares.
type fileSystem struct {
	tables string
	pool   *os.File // the pool's root, opened once; every path resolves below it
	log    *slog.Logger
	start  time.Time
	serial atomic.Uint64 // last entry serial handed out
}

// open opens rel (relative to the pool's root) with flags, refusing any
// path that would leave the pool, pass a symbolic link or cross a mount,
// however long: a sandbox can nest directories past PATH_MAX.
func (f *fileSystem) open(rel string, flags int) (int, error) {
	return hosttree.OpenBeneathFd(int(f.pool.Fd()), rel, flags)
}

// dirAttr fills the attributes of one of the view's own directories, with
// the times of st (of the file whose content it shows) when set.
func (f *fileSystem) dirAttr(a *fuse.Attr, st *unix.Stat_t) {
	a.Mode = syscall.S_IFDIR | 0o555
	a.Nlink = 2
	a.SetTimes(&f.start, &f.start, &f.start)
	if st != nil && st.Ino != 0 {
		a.Mtime, a.Mtimensec = uint64(st.Mtim.Sec), uint32(st.Mtim.Nsec)
		a.Ctime, a.Ctimensec = uint64(st.Ctim.Sec), uint32(st.Ctim.Nsec)
	}
}

func toErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return syscall.EIO
}

// rootNode is the mount point: a directory per sandbox that has a table.
type rootNode struct {
	fs.Inode
	fsys *fileSystem
}

var (
	_ fs.NodeLookuper   = (*rootNode)(nil)
	_ fs.NodeReaddirer  = (*rootNode)(nil)
	_ fs.NodeGetattrer  = (*rootNode)(nil)
	_ fs.NodeGetxattrer = (*rootNode)(nil)
	_ fs.NodeStatfser   = (*rootNode)(nil)
)

func (r *rootNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if !ValidName(name) {
		return nil, syscall.ENOENT
	}
	var st unix.Stat_t
	if err := unix.Stat(tablePath(r.fsys.tables, name), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, syscall.ENOENT
	}
	out.SetEntryTimeout(0)
	out.SetAttrTimeout(0)
	r.fsys.dirAttr(&out.Attr, &st)
	// The same node for a sandbox as long as the kernel knows it: a
	// container bound to this directory keeps it when the table comes
	// back after an Unpublish.
	if ch := r.GetChild(name); ch != nil {
		if _, ok := ch.Operations().(*sandboxNode); ok {
			return ch, 0
		}
	}
	return r.NewInode(ctx, &sandboxNode{fsys: r.fsys, id: name}, fs.StableAttr{Mode: syscall.S_IFDIR}), 0
}

func (r *rootNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	return newLiveList(r.list)
}

func (r *rootNode) list() ([]fuse.DirEntry, syscall.Errno) {
	names, err := os.ReadDir(r.fsys.tables)
	if err != nil {
		return nil, toErrno(err)
	}
	var list []fuse.DirEntry
	for _, d := range names {
		id, ok := strings.CutSuffix(d.Name(), ".json")
		if ok && ValidName(id) && d.Type().IsRegular() {
			list = append(list, fuse.DirEntry{Name: id, Mode: syscall.S_IFDIR})
		}
	}
	return list, 0
}

// liveList is a listing of one of the view's own directories that is made
// again when it is rewound: gVisor reads a directory again through the
// descriptor it keeps open, by seeking it back to 0, and would otherwise
// be served the entries of its first reading for good. go-fuse calls
// Seekdir only when the offset asked for is not where the last reading
// ended; "." and ".." come first, so that is never 0 after a reading.
type liveList struct {
	list    func() ([]fuse.DirEntry, syscall.Errno)
	entries []fuse.DirEntry
	idx     int
}

var _ fs.FileSeekdirer = (*liveList)(nil)

func newLiveList(list func() ([]fuse.DirEntry, syscall.Errno)) (fs.DirStream, syscall.Errno) {
	l := &liveList{list: list}
	if errno := l.Seekdir(context.Background(), 0); errno != 0 {
		return nil, errno
	}
	return l, 0
}

func (l *liveList) HasNext() bool { return l.idx < len(l.entries) }

func (l *liveList) Next() (fuse.DirEntry, syscall.Errno) {
	e := l.entries[l.idx]
	l.idx++
	e.Off = uint64(l.idx)
	return e, 0
}

func (l *liveList) Close() {}

func (l *liveList) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if off == 0 {
		entries, errno := l.list()
		if errno != 0 {
			return errno
		}
		l.entries = append([]fuse.DirEntry{{Name: ".", Mode: syscall.S_IFDIR}, {Name: "..", Mode: syscall.S_IFDIR}}, entries...)
	}
	if off > uint64(len(l.entries)) {
		return syscall.EINVAL
	}
	l.idx = int(off)
	return 0
}

// Getattr gives the root the times of the tables directory, which change
// whenever a table comes or goes.
func (r *rootNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	var st unix.Stat_t
	if err := unix.Stat(r.fsys.tables, &st); err != nil {
		return toErrno(err)
	}
	r.fsys.dirAttr(&out.Attr, &st)
	out.SetTimeout(0)
	return 0
}

func (r *rootNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if attr != pidXattr {
		return 0, syscall.ENODATA
	}
	v := []byte(itoa(os.Getpid()))
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

func (r *rootNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	var s unix.Statfs_t
	if err := unix.Fstatfs(int(r.fsys.pool.Fd()), &s); err != nil {
		return toErrno(err)
	}
	out.Blocks, out.Bfree, out.Bavail = s.Blocks, s.Bfree, s.Bavail
	out.Files, out.Ffree = s.Files, s.Ffree
	out.Bsize, out.Frsize, out.NameLen = uint32(s.Bsize), uint32(s.Frsize), uint32(s.Namelen)
	return 0
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// entry is one served directory of a sandbox. A changed table never
// changes an entry: an entry whose name goes, or now names another path, is
// marked gone and a new one made, so that every node below it stops
// answering at once.
type entry struct {
	name, path string
	serial     uint64 // unique for the server's life: the Gen of its nodes
	gone       atomic.Bool
	warned     atomic.Bool // its path failed to resolve and that was logged
}

// ino is the inode number shown for the file numbered hostIno inside the
// entry: distinct between entries (two checkpoints share inode numbers),
// and the node identity go-fuse keeps is made unique by Gen = serial.
func (e *entry) ino(hostIno uint64) uint64 {
	return e.serial<<40 ^ hostIno
}

// sandboxNode is one sandbox's directory: its table's entries.
type sandboxNode struct {
	fs.Inode
	fsys *fileSystem
	id   string

	mu      sync.Mutex
	have    bool        // the table existed when last read
	st      unix.Stat_t // of the table then
	readAt  time.Time
	raw     []byte
	entries []*entry  // in the table's order
	changed time.Time // when entries last changed
}

var (
	_ fs.NodeLookuper  = (*sandboxNode)(nil)
	_ fs.NodeReaddirer = (*sandboxNode)(nil)
	_ fs.NodeGetattrer = (*sandboxNode)(nil)
)

// load returns the entries of the table as it is now. The table is read
// again unless its stat is unchanged and it had been that way for a second
// before it was last read (a file replaced within a timestamp's
// granularity, on a reused inode, could otherwise look the same).
func (s *sandboxNode) load() []*entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := tablePath(s.fsys.tables, s.id)
	var st unix.Stat_t
	err := unix.Stat(p, &st)
	if err == nil && s.have && sameStat(&st, &s.st) && time.Unix(st.Ctim.Unix()).Before(s.readAt.Add(-time.Second)) {
		return s.entries
	}
	if errors.Is(err, unix.ENOENT) {
		s.replace(nil, false, nil)
		return nil
	}
	data, st, ok, err := readTable(s.fsys.tables, s.id)
	if err != nil && !errors.Is(err, errBadTable) {
		// A table that cannot be read now: keep what was served
		// rather than flap.
		s.fsys.log.Warn("browse: reading a table", "sandbox", s.id, "err", err)
		return s.entries
	}
	s.readAt = time.Now()
	s.st = st
	if err != nil {
		s.fsys.log.Warn("browse: table not served", "sandbox", s.id, "err", err)
		s.replace(nil, true, nil)
		return nil
	}
	if !ok {
		s.replace(nil, false, nil)
		return nil
	}
	if s.have && bytes.Equal(data, s.raw) {
		return s.entries
	}
	list, bad := parseTable(data)
	for _, why := range bad {
		s.fsys.log.Warn("browse: table entry not served", "sandbox", s.id, "why", why)
	}
	s.replace(list, true, data)
	return s.entries
}

// replace makes list the served entries, keeping the entries that did not
// change and marking the others gone.
func (s *sandboxNode) replace(list []Entry, have bool, raw []byte) {
	old := make(map[string]*entry, len(s.entries))
	for _, e := range s.entries {
		old[e.name] = e
	}
	var next []*entry
	for _, n := range list {
		if e := old[n.Name]; e != nil && e.path == n.Path {
			delete(old, n.Name)
			next = append(next, e)
			continue
		}
		next = append(next, &entry{name: n.Name, path: n.Path, serial: s.fsys.serial.Add(1)})
	}
	for _, e := range old {
		e.gone.Store(true)
	}
	if len(old) > 0 || len(next) != len(s.entries) || have != s.have {
		s.changed = time.Now()
	}
	s.entries, s.have, s.raw = next, have, raw
	if len(old) > 0 || len(next) > 0 {
		names := make([]string, len(next))
		for i, e := range next {
			names[i] = e.name
		}
		s.fsys.log.Debug("browse: table loaded", "sandbox", s.id, "entries", names)
	}
}

func sameStat(a, b *unix.Stat_t) bool {
	return a.Dev == b.Dev && a.Ino == b.Ino && a.Size == b.Size && a.Mtim == b.Mtim && a.Ctim == b.Ctim
}

// stat returns the attributes of e's directory in the pool, or an error if
// it is not a directory that resolves inside the pool.
func (s *sandboxNode) stat(e *entry) (unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := s.fsys.open(e.path, unix.O_PATH|unix.O_DIRECTORY)
	if err == nil {
		err = unix.Fstat(fd, &st)
		unix.Close(fd)
	}
	if err != nil && !e.warned.Swap(true) {
		s.fsys.log.Warn("browse: entry not served: its path does not resolve to a directory inside the pool",
			"sandbox", s.id, "name", e.name, "path", e.path, "err", err)
	}
	return st, err
}

func (s *sandboxNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	for _, e := range s.load() {
		if e.name != name {
			continue
		}
		st, err := s.stat(e)
		if err != nil {
			return nil, syscall.ENOENT
		}
		out.Attr.FromStat(statT(&st))
		out.Attr.Ino = e.ino(st.Ino)
		out.SetEntryTimeout(0)
		out.SetAttrTimeout(innerTimeout)
		n := &passNode{e: e, fsys: s.fsys}
		return s.NewInode(ctx, n, fs.StableAttr{Mode: syscall.S_IFDIR, Ino: e.ino(st.Ino), Gen: e.serial}), 0
	}
	return nil, syscall.ENOENT
}

func (s *sandboxNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	return newLiveList(s.list)
}

func (s *sandboxNode) list() ([]fuse.DirEntry, syscall.Errno) {
	var list []fuse.DirEntry
	for _, e := range s.load() {
		if st, err := s.stat(e); err == nil {
			list = append(list, fuse.DirEntry{Name: e.name, Mode: syscall.S_IFDIR, Ino: e.ino(st.Ino)})
		}
	}
	return list, 0
}

// Getattr gives the directory the time its entries last changed as its
// modification and change time, as a directory of the pool would have.
func (s *sandboxNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	s.load()
	s.mu.Lock()
	changed := s.changed
	s.mu.Unlock()
	s.fsys.dirAttr(&out.Attr, nil)
	if !changed.IsZero() {
		out.SetTimes(nil, &changed, &changed)
	}
	out.SetTimeout(0)
	return 0
}

// statT converts x/sys/unix's Stat_t to syscall's, which go-fuse takes;
// the two have the same layout field by field.
func statT(st *unix.Stat_t) *syscall.Stat_t {
	return &syscall.Stat_t{
		Dev: st.Dev, Ino: st.Ino, Nlink: st.Nlink, Mode: st.Mode, Uid: st.Uid, Gid: st.Gid,
		Rdev: st.Rdev, Size: st.Size, Blksize: st.Blksize, Blocks: st.Blocks,
		Atim: syscall.Timespec(st.Atim), Mtim: syscall.Timespec(st.Mtim), Ctim: syscall.Timespec(st.Ctim),
	}
}

// passNode is a file, directory or symbolic link inside an entry, served
// from the same path below the entry's directory in the pool.
type passNode struct {
	fs.Inode
	fsys *fileSystem
	e    *entry
	rel  string // below the entry's directory; "" for the entry itself
}

var (
	_ fs.NodeLookuper   = (*passNode)(nil)
	_ fs.NodeReaddirer  = (*passNode)(nil)
	_ fs.NodeGetattrer  = (*passNode)(nil)
	_ fs.NodeOpener     = (*passNode)(nil)
	_ fs.NodeReadlinker = (*passNode)(nil)
	_ fs.NodeStatfser   = (*passNode)(nil)
)

// poolPath is the node's path relative to the pool's root.
func (n *passNode) poolPath() string { return path.Join(n.e.path, n.rel) }

// atParent calls fn with an O_PATH descriptor of the directory that holds
// the node and the node's name in it (for the entry itself: the entry's
// directory and "", to be used with AT_EMPTY_PATH).
func (n *passNode) atParent(fn func(dirfd int, name string) error) error {
	if n.e.gone.Load() {
		return unix.ENOENT
	}
	dir, name := n.e.path, ""
	if n.rel != "" {
		d, b := path.Split(n.rel)
		dir, name = path.Join(n.e.path, d), b
	}
	fd, err := n.fsys.open(dir, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return fn(fd, name)
}

func (n *passNode) lstat(st *unix.Stat_t) error {
	return n.atParent(func(dirfd int, name string) error {
		flags := unix.AT_SYMLINK_NOFOLLOW
		if name == "" {
			flags |= unix.AT_EMPTY_PATH
		}
		return unix.Fstatat(dirfd, name, st, flags)
	})
}

func (n *passNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.e.gone.Load() {
		return nil, syscall.ENOENT
	}
	fd, err := n.fsys.open(n.poolPath(), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return nil, toErrno(err)
	}
	var st unix.Stat_t
	err = unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	unix.Close(fd)
	if err != nil {
		return nil, toErrno(err)
	}
	out.Attr.FromStat(statT(&st))
	out.Attr.Ino = n.e.ino(st.Ino)
	out.SetEntryTimeout(innerTimeout)
	out.SetAttrTimeout(innerTimeout)
	ch := &passNode{fsys: n.fsys, e: n.e, rel: path.Join(n.rel, name)}
	return n.NewInode(ctx, ch, fs.StableAttr{Mode: st.Mode & syscall.S_IFMT, Ino: n.e.ino(st.Ino), Gen: n.e.serial}), 0
}

func (n *passNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := f.(*roFile); ok {
		return h.Getattr(ctx, out)
	}
	var st unix.Stat_t
	if err := n.lstat(&st); err != nil {
		return toErrno(err)
	}
	out.FromStat(statT(&st))
	out.Ino = n.e.ino(st.Ino)
	out.SetTimeout(innerTimeout)
	return 0
}

func (n *passNode) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	var target []byte
	err := n.atParent(func(dirfd int, name string) error {
		for size := 256; ; size *= 2 {
			buf := make([]byte, size)
			k, err := unix.Readlinkat(dirfd, name, buf)
			if err != nil {
				return err
			}
			if k < size {
				target = buf[:k]
				return nil
			}
		}
	})
	return target, toErrno(err)
}

func (n *passNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	if n.e.gone.Load() {
		return nil, syscall.ENOENT
	}
	fd, err := n.fsys.open(n.poolPath(), unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, toErrno(err)
	}
	ds, errno := fs.NewLoopbackDirStreamFd(fd)
	if errno != 0 {
		unix.Close(fd)
		return nil, errno
	}
	return &dirStream{ds: ds, e: n.e}, 0
}

// Open opens a regular file for reading; anything that would write is
// refused with EROFS (the kernel refuses it first on a read-only mount).
func (n *passNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&(syscall.O_TRUNC|syscall.O_CREAT|syscall.O_APPEND) != 0 {
		return nil, 0, syscall.EROFS
	}
	if n.e.gone.Load() {
		return nil, 0, syscall.ENOENT
	}
	// Look at what the path is before opening it for reading: opening a
	// FIFO or a device has effects of its own.
	pfd, err := n.fsys.open(n.poolPath(), unix.O_PATH)
	if err != nil {
		return nil, 0, toErrno(err)
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return nil, 0, toErrno(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, 0, syscall.EACCES
	}
	// Reopen what was checked, not the path again.
	fd, err := unix.Open("/proc/self/fd/"+itoa(pfd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, toErrno(err)
	}
	return &roFile{fd: fd, e: n.e}, 0, 0
}

func (n *passNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	var s unix.Statfs_t
	if err := unix.Fstatfs(int(n.fsys.pool.Fd()), &s); err != nil {
		return toErrno(err)
	}
	out.Blocks, out.Bfree, out.Bavail = s.Blocks, s.Bfree, s.Bavail
	out.Files, out.Ffree = s.Files, s.Ffree
	out.Bsize, out.Frsize, out.NameLen = uint32(s.Bsize), uint32(s.Frsize), uint32(s.Namelen)
	return 0
}

// dirStream lists a directory inside an entry with the inode numbers the
// view shows. It forwards only reading and seeking (not, for instance, the
// ioctls go-fuse's own stream would pass to the pool).
type dirStream struct {
	ds fs.DirStream
	e  *entry
}

var _ fs.FileSeekdirer = (*dirStream)(nil)

func (d *dirStream) HasNext() bool { return d.ds.HasNext() }

func (d *dirStream) Next() (fuse.DirEntry, syscall.Errno) {
	de, errno := d.ds.Next()
	if errno == 0 && de.Name != "." && de.Name != ".." {
		de.Ino = d.e.ino(de.Ino)
	}
	return de, errno
}

func (d *dirStream) Close() { d.ds.Close() }

func (d *dirStream) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if sd, ok := d.ds.(fs.FileSeekdirer); ok {
		return sd.Seekdir(ctx, off)
	}
	return syscall.ENOTSUP
}

// roFile is an open regular file inside an entry. The kernel reads it
// directly from the pool when it can (FUSE passthrough, PassthroughFd);
// otherwise reads come here.
type roFile struct {
	mu sync.RWMutex // guards fd against Release
	fd int
	e  *entry
}

var (
	_ fs.FileReader          = (*roFile)(nil)
	_ fs.FileReleaser        = (*roFile)(nil)
	_ fs.FileGetattrer       = (*roFile)(nil)
	_ fs.FileLseeker         = (*roFile)(nil)
	_ fs.FilePassthroughFder = (*roFile)(nil)
)

func (f *roFile) PassthroughFd() (int, bool) { return f.fd, true }

func (f *roFile) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n, err := unix.Pread(f.fd, buf, off)
	if err != nil {
		return nil, toErrno(err)
	}
	return fuse.ReadResultData(buf[:n]), 0
}

func (f *roFile) Release(ctx context.Context) syscall.Errno {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fd >= 0 {
		unix.Close(f.fd)
		f.fd = -1
	}
	return 0
}

func (f *roFile) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var st unix.Stat_t
	if err := unix.Fstat(f.fd, &st); err != nil {
		return toErrno(err)
	}
	out.FromStat(statT(&st))
	out.Ino = f.e.ino(st.Ino)
	out.SetTimeout(innerTimeout)
	return 0
}

func (f *roFile) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := unix.Seek(f.fd, int64(off), int(whence))
	return uint64(n), toErrno(err)
}
