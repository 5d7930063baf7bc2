package buildctx

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrNoUser: a user or group name that the image's /etc/passwd or
// /etc/group does not have.
var ErrNoUser = errors.New("no such user or group")

// maxAccountFile bounds the /etc/passwd and /etc/group read.
const maxAccountFile = 4 << 20

// User is who a RUN runs as, or who owns what a COPY --chown copies.
type User struct {
	UID, GID uint32
	// Groups are the supplementary groups (those of /etc/group that
	// list the user, its primary group left out); empty, not nil, when
	// there are none or the group was given.
	Groups []uint32
	// Home is the user's home directory from /etc/passwd; "" when the
	// user is not in it.
	Home string
}

// LookupUser resolves spec, as a Dockerfile's USER or COPY --chown gives
// it ("name", "uid", "name:group", "uid:gid", a group as a name or a
// number; "" is root), against the /etc/passwd and /etc/group of the
// image root root. A numeric uid need not be in /etc/passwd (its group is
// then 0), a name must (else an error wrapping ErrNoUser names it); so
// must a group name. A given group is the only group (as Docker does).
//
// The files are untrusted: they are opened inside the root (a symbolic
// link followed as a container would, never out of it), must be regular
// files of at most 4 MiB, and a missing one is as if empty.
func LookupUser(root *os.File, spec string) (User, error) {
	name, group, hasGroup := strings.Cut(spec, ":")
	if name == "" {
		if hasGroup {
			return User{}, fmt.Errorf("user %q: no user before the \":\"", spec)
		}
		name = "0"
	}
	passwd, err := readAccounts(root, "etc/passwd")
	if err != nil {
		return User{}, err
	}
	u := User{Groups: []uint32{}}
	var entry []string // name:password:uid:gid:gecos:home:shell
	if n, err := strconv.ParseUint(name, 10, 32); err == nil {
		u.UID = uint32(n)
		entry = findAccount(passwd, func(f []string) bool {
			if len(f) < 4 {
				return false
			}
			id, err := parseID(f[2])
			return err == nil && id == u.UID
		})
	} else {
		entry = findAccount(passwd, func(f []string) bool { return len(f) >= 4 && f[0] == name })
		if entry == nil {
			return User{}, fmt.Errorf("user %q: %w in the image's /etc/passwd", name, ErrNoUser)
		}
		if u.UID, err = parseID(entry[2]); err != nil {
			return User{}, fmt.Errorf("user %q in /etc/passwd: uid %w", name, err)
		}
	}
	if entry != nil {
		if u.GID, err = parseID(entry[3]); err != nil {
			return User{}, fmt.Errorf("user %q in /etc/passwd: gid %w", name, err)
		}
		if len(entry) >= 6 {
			u.Home = entry[5]
		}
	}
	groups, err := readAccounts(root, "etc/group")
	if err != nil {
		return User{}, err
	}
	if hasGroup {
		if n, err := strconv.ParseUint(group, 10, 32); err == nil {
			u.GID = uint32(n)
			return u, nil
		}
		g := findAccount(groups, func(f []string) bool { return len(f) >= 3 && f[0] == group })
		if g == nil {
			return User{}, fmt.Errorf("group %q: %w in the image's /etc/group", group, ErrNoUser)
		}
		if u.GID, err = parseID(g[2]); err != nil {
			return User{}, fmt.Errorf("group %q in /etc/group: gid %w", group, err)
		}
		return u, nil
	}
	if entry == nil {
		return u, nil
	}
	// name:password:gid:member,member…
	for _, f := range splitAccounts(groups) {
		if len(f) < 4 {
			continue
		}
		gid, err := parseID(f[2])
		if err != nil || gid == u.GID {
			continue
		}
		for m := range strings.SplitSeq(f[3], ",") {
			if m == entry[0] && !slices.Contains(u.Groups, gid) {
				u.Groups = append(u.Groups, gid)
			}
		}
	}
	return u, nil
}

func parseID(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	return uint32(n), nil
}

// readAccounts reads rel (etc/passwd, etc/group) of the image root; a
// missing file reads as empty.
func readAccounts(root *os.File, rel string) ([]byte, error) {
	fd, err := openIn(fdOf(root), rel, unix.O_RDONLY|unix.O_NONBLOCK)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the image's /%s: %w", rel, err)
	}
	f := openFile(fd, "/"+rel)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("the image's /%s is not a regular file", rel)
	}
	if st.Size > maxAccountFile {
		return nil, fmt.Errorf("the image's /%s: more than %d bytes", rel, maxAccountFile)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxAccountFile+1))
	if err != nil {
		return nil, fmt.Errorf("read the image's /%s: %w", rel, err)
	}
	if len(data) > maxAccountFile {
		return nil, fmt.Errorf("the image's /%s: more than %d bytes", rel, maxAccountFile)
	}
	return data, nil
}

// splitAccounts returns the lines of an account file split at ":",
// comments and blank lines left out.
func splitAccounts(data []byte) [][]string {
	var out [][]string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 4096), maxAccountFile)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, strings.Split(line, ":"))
	}
	return out
}

// findAccount returns the first line of data whose fields match.
func findAccount(data []byte, match func(fields []string) bool) []string {
	for _, f := range splitAccounts(data) {
		if match(f) {
			return f
		}
	}
	return nil
}
