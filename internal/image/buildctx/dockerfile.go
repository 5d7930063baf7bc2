package buildctx

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Bounds on the reserved files.
const (
	// MaxDockerfileSize bounds a Dockerfile.
	MaxDockerfileSize = 4 << 20
	// maxIgnoreFile bounds a .dockerignore file.
	maxIgnoreFile = 4 << 20
)

// beneath is how the reserved files are opened in an extracted context:
// below its root, through no symbolic link at all, onto no other mount.
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// ReadDockerfile returns the Dockerfile of the context extracted into
// root (DockerfileName). The context is untrusted: the name must be a
// regular file (no symbolic link on the way), of at most
// MaxDockerfileSize bytes.
func ReadDockerfile(root *os.File) ([]byte, error) {
	return readReserved(root, DockerfileName, MaxDockerfileSize)
}

// ReadIgnore returns the .dockerignore file the client applied to the
// context extracted into root (IgnoreName; empty when there was none).
func ReadIgnore(root *os.File) ([]byte, error) {
	return readReserved(root, IgnoreName, maxIgnoreFile)
}

func readReserved(root *os.File, rel string, max int64) ([]byte, error) {
	how := &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC, Resolve: beneath}
	var fd int
	var err error
	for {
		fd, err = unix.Openat2(fdOf(root), rel, how)
		if !errors.Is(err, unix.EINTR) && !errors.Is(err, unix.EAGAIN) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("the build context's %s: %w", rel, err)
	}
	f := openFile(fd, rel)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("the build context's %s is not a regular file", rel)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read the build context's %s: %w", rel, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("the build context's %s: more than %d bytes", rel, max)
	}
	return data, nil
}
