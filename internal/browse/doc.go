// Package browse serves /.cairn/checkpoints, the read-only view a sandbox
// has of its newest checkpoints, without moving or copying any checkpoint.
//
// One FUSE file system (go-fuse), mounted once at a directory M, holds one
// directory per sandbox, M/<sandbox id>, bound read-only into that sandbox
// at /.cairn/checkpoints. Its entries are listed by a table per sandbox,
// <tables>/<sandbox id>.json, that cairnd writes with Publish (atomically)
// and removes with Unpublish; each entry names a directory in the pool (a
// checkpoint's own subvolume, "checkpoints/<id>") that the view passes
// through read-only. gVisor does not see mounts made on the host after a
// sandbox started, but it does see entries of a bound FUSE directory come
// and go, so the one mount is made before any sandbox starts and only the
// tables change afterwards. Nothing is copied: a checkpoint's subvolume
// stays the one owner of its data, and its exclusive size stays exact.
//
// The server reads a sandbox's table again at the next lookup or listing
// of that sandbox's directory (it stats the file; there is no polling).
// Names of the view's own directories are cached by the kernel for 0 s, so
// an entry removed from a table is gone from listings and lookups at once;
// a process already inside it (a working directory, an open directory)
// gets ENOENT from then on, and files it holds open stay readable. Inside
// an entry, names and attributes are cached for a second (a checkpoint
// never changes).
//
// Safety: every path is opened below the pool's root, opened once at
// start, with openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_XDEV:
// no table and no symbolic link in the pool can make the server serve
// anything outside the pool. Bad table entries are logged and not served.
// The mount is read-only (superblock and mount flags), nodev and nosuid,
// with default_permissions and without allow_other; the server implements
// no operation that writes, and opens only regular files, for reading.
// Regular files are read by the kernel straight from the pool (FUSE
// passthrough) where the kernel allows it.
//
// The server is a process of its own (`cairnd browse-server`), which
// Ensure starts detached (its own session and log) when no live view is
// mounted, replacing a dead one (a server killed leaves a mount that
// answers ENOTCONN). It outlives cairnd: a cairnd killed with -9 and
// restarted finds the view live and leaves it be, and running sandboxes
// keep a working view throughout. It exits when its mount goes away (Stop,
// or unmounted by hand once no container holds it) and on SIGTERM. A
// sandbox started before a server died keeps the dead view until it is
// restarted: its bind cannot be pointed at the new mount. The layout and
// the table format are in docs/browse.md.
package browse
