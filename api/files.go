package api

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"time"
)

// The Files API: a running sandbox's files, as the sandbox sees them.
// cairn-init does the work inside the sandbox, so that every path is
// resolved in the sandbox's own mount namespace (its symbolic links point
// into the sandbox, never at the host's files). See docs/files.md.

// AgentOpFiles is the op of a stream that works on the sandbox's files: its
// AgentRequest carries a FileRequest. Reply: a FileReply line (an error
// there means nothing was done), then what FileRequest.Op defines.
const AgentOpFiles = "files"

// Ops of a FileRequest, and what follows their first reply line.
const (
	FileOpStat   = "stat"    // reply: FileReply{Entry}
	FileOpList   = "list"    // reply: FileReply{}; then a FileReply{Entry} line per entry; then FileReply{Done} (or {Error})
	FileOpRead   = "read"    // reply: FileReply{Entry}; then FrameFileData frames; then FrameFileEnd
	FileOpWrite  = "write"   // reply: FileReply{}; cairnd sends FrameFileData frames, then FrameFileEnd; reply: FileReply{Entry} once it is in place
	FileOpMkdir  = "mkdir"   // reply: FileReply{Entry, Created}
	FileOpRemove = "remove"  // reply: FileReply{}
	FileOpRename = "rename"  // reply: FileReply{Entry} of the new path
	FileOpTarOut = "tar_out" // reply: FileReply{Entry}; then FrameFileData frames of a tar stream; then FrameFileEnd
	FileOpTarIn  = "tar_in"  // reply: FileReply{}; cairnd sends a tar stream as FileOpWrite does; reply: FileReply{Tar}
	FileOpWatch  = "watch"   // reply: FileReply{}; then a FileReply{Event} line per event, until cairnd closes the stream
)

// Frames of the data of a read, write, tar_out or tar_in (api.WriteFrame).
const (
	FrameFileData FrameType = 10 // payload: the next bytes
	FrameFileEnd  FrameType = 11 // payload: JSON AgentResult: Error empty if every byte was sent; the last frame
)

// FileChunk is how many bytes a FrameFileData frame carries at most.
const FileChunk = MaxFramePayload

// FileRequest asks cairn-init for one op on the sandbox's files.
type FileRequest struct {
	Op   string `json:"op"`   // one of the FileOp… constants
	Path string `json:"path"` // absolute path inside the sandbox; for rename the source
	// To is rename's destination.
	To string `json:"to,omitempty"`
	// Depth is list's: 1 lists the directory's entries, 2 their entries
	// too, and so on (0 is 1); at most MaxListDepth.
	Depth int `json:"depth,omitempty"`
	// Mode is the permission bits (and setuid, setgid, sticky) of what
	// write or mkdir makes; nil: 0644 for a new file, 0755 for a
	// directory, an existing file's own.
	Mode *uint32 `json:"mode,omitempty"`
	// Owner is who write, mkdir or tar_in's parents belong to: user,
	// uid, user:group or uid:gid, looked up in the sandbox's /etc/passwd
	// and /etc/group; "": root (an existing file's own, on write).
	Owner string `json:"owner,omitempty"`
	// Parents: write, mkdir and tar_in make missing parent directories
	// (for mkdir: and an existing directory is no error, as mkdir -p).
	Parents bool `json:"parents,omitempty"`
	// Recursive: remove removes a directory with what it holds; watch
	// watches the subdirectories too.
	Recursive bool `json:"recursive,omitempty"`
}

// Bounds of a FileRequest.
const (
	MaxPath         = 4096    // bytes of a path (PATH_MAX)
	MaxListDepth    = 64      // FileRequest.Depth
	MaxWatchStreams = 16      // watch streams open at once on one sandbox
	MaxWatchDirs    = 8192    // directories one recursive watch follows
	MaxListEntries  = 1 << 20 // entries one list answers; more fail with CodeFileLimit
	MaxTarEntries   = 1 << 20 // entries one tar_in extracts
	MaxTarName      = MaxPath // bytes of one tar entry's name or link target
)

// CheckPath checks p is a path a FileRequest may carry: absolute, at most
// MaxPath bytes, no NUL. It returns it cleaned ("/a/../b" is "/b"; "/.."
// is "/": a path never leaves the sandbox's root).
func CheckPath(p string) (string, error) {
	switch {
	case p == "":
		return "", errors.New("no path given")
	case !strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("path %q is not absolute", p)
	case len(p) > MaxPath:
		return "", fmt.Errorf("path of %d bytes, at most %d", len(p), MaxPath)
	case strings.IndexByte(p, 0) >= 0:
		return "", errors.New("path holds a NUL byte")
	}
	return path.Clean(p), nil
}

// FileReply is every line cairn-init answers on a files stream. A non-empty
// Error means the op failed, Code (a FileErr… or AgentErr… code) says how.
type FileReply struct {
	Entry   *FileEntry `json:"entry,omitempty"`
	Created bool       `json:"created,omitempty"` // mkdir made the directory (false: it existed)
	Event   *FileEvent `json:"event,omitempty"`
	Tar     *TarResult `json:"tar,omitempty"`
	Done    bool       `json:"done,omitempty"` // the last line of a list
	Error   string     `json:"error,omitempty"`
	Code    string     `json:"code,omitempty"`
}

// Codes of a failed files op (FileReply.Code), beside AgentErrInvalid and
// AgentErrNotFound.
const (
	FileErrExists     = "exists"
	FileErrNotDir     = "not_dir"
	FileErrIsDir      = "is_dir"
	FileErrNotEmpty   = "not_empty"
	FileErrPermission = "permission"
	FileErrNoSpace    = "no_space"
	FileErrBadTar     = "bad_tar"
	FileErrLimit      = "limit"       // an answer too large (CodeFileLimit)
	FileErrWatches    = "watch_limit" // MaxWatchStreams open already
	FileErrIO         = "io"
)

// Types of a FileEntry.
const (
	FileTypeFile    = "file"
	FileTypeDir     = "dir"
	FileTypeSymlink = "symlink"
	FileTypeOther   = "other" // device, fifo, socket
)

// FileEntry is one file of a sandbox, as lstat sees it inside: a symbolic
// link is an entry of its own (SymlinkTarget), not what it points at.
// Names are the sandbox's: untrusted.
type FileEntry struct {
	Name          string    `json:"name"` // last element of Path ("/" for the root)
	Path          string    `json:"path"` // absolute, inside the sandbox
	Type          string    `json:"type"` // one of the FileType… constants
	Size          int64     `json:"size"`
	Mode          uint32    `json:"mode"`        // permission bits with setuid (04000), setgid (02000), sticky (01000)
	Permissions   string    `json:"permissions"` // as ls -l shows them: drwxr-xr-x
	UID           uint32    `json:"uid"`
	GID           uint32    `json:"gid"`
	Owner         string    `json:"owner,omitempty"` // user name of UID in the sandbox's /etc/passwd, if any
	Group         string    `json:"group,omitempty"` // group name of GID in its /etc/group, if any
	ModTime       time.Time `json:"mod_time"`
	SymlinkTarget string    `json:"symlink_target,omitempty"`
}

// Types of a FileEvent.
const (
	FileEventCreate = "create" // a file, directory or link appeared (moved in included)
	FileEventWrite  = "write"  // a file's content changed
	FileEventRemove = "remove" // it is gone (moved out of the watched tree included)
	FileEventRename = "rename" // moved within the watched tree: Path is the old path, To the new
	FileEventChmod  = "chmod"  // its mode, owner or times changed
)

// FileEvent is one line of a watch: what a process did to a file under the
// watched directory. Consecutive writes to one file come as one event.
type FileEvent struct {
	Type  string `json:"type"`             // one of the FileEvent… constants
	Name  string `json:"name"`             // Path relative to the watched directory
	Path  string `json:"path"`             // absolute, inside the sandbox
	To    string `json:"to,omitempty"`     // for rename: the new absolute path
	IsDir bool   `json:"is_dir,omitempty"` // it is a directory
}

// TarResult says what a tar stream put into a sandbox.
type TarResult struct {
	Entries int   `json:"entries"` // files, directories and links made
	Bytes   int64 `json:"bytes"`   // bytes of file content written
}

// MakeDirRequest is the body of POST /v1/sandboxes/{name}/files/mkdir.
type MakeDirRequest struct {
	Path    string  `json:"path"`
	Mode    *uint32 `json:"mode,omitempty"`    // default 0755
	Owner   string  `json:"owner,omitempty"`   // user[:group] inside; default root
	Parents bool    `json:"parents,omitempty"` // mkdir -p: make parents, an existing directory is no error
}

// RenameRequest is the body of POST /v1/sandboxes/{name}/files/rename.
type RenameRequest struct {
	From string `json:"from"`
	To   string `json:"to"` // replaced if it is a file or an empty directory, as rename(2) does
}
