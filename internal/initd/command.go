package initd

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/api"
)

// toolsDir holds cairn's own tools in a sandbox (cairn-env). It ends the
// PATH of commands and services, so that it shadows nothing in the image.
const toolsDir = "/.cairn/bin"

// defaultPath is the PATH of commands and services unless the environment
// sets another.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:" + toolsDir

// command builds the exec.Cmd for req, without stdio or process attributes.
// base is the environment every command starts from. The program is looked
// up in the PATH the command will get, not ours.
//
// The image's working directory and user (imageDefaults) apply when req
// names none; a user's HOME is its home directory. The Cmd comes with
// SysProcAttr set (its Credential); callers add to it.
func command(base []string, req api.ExecRequest) (*exec.Cmd, error) {
	if len(req.Command) == 0 || req.Command[0] == "" {
		return nil, errors.New("exec: no command")
	}
	base, imageDir, imageUser := imageDefaults(base)
	usr := req.User
	if usr == "" {
		usr = imageUser
	}
	who, err := lookupUser(usr)
	if err != nil {
		return nil, err
	}
	env := environ(base, req, who.home)
	dir := req.Dir
	if dir == "" {
		dir = imageDir
	}
	if dir == "" {
		dir = "/"
	}
	if err := checkDir(dir); err != nil {
		return nil, err
	}
	path, err := lookPath(req.Command[0], pathOf(env), dir)
	if err != nil {
		return nil, err
	}
	return &exec.Cmd{Path: path, Args: req.Command, Env: env, Dir: dir,
		SysProcAttr: &syscall.SysProcAttr{Credential: who.cred}}, nil
}

// checkDir says why dir cannot be a working directory. Without it, Start
// would blame the program: "fork/exec /bin/ls: no such file or directory".
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	var pe *os.PathError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case err == nil && !fi.IsDir():
		err = unix.ENOTDIR
	}
	if err != nil {
		return fmt.Errorf("exec: dir %q: %w", dir, err)
	}
	return nil
}

// environ is the environment of req's command: PATH and HOME defaults,
// then base without TERM (toolsDir added to the end of its PATH), the
// user's home as HOME, then TERM for a terminal, then req.Env. A later KEY=VALUE replaces an earlier one.
func environ(base []string, req api.ExecRequest, home string) []string {
	env := []string{"PATH=" + defaultPath, "HOME=/root"}
	for _, kv := range base {
		if !strings.HasPrefix(kv, "TERM=") { // it describes cairn-init's console
			env = setenv(env, kv)
		}
	}
	if home != "" {
		env = setenv(env, "HOME="+home)
	}
	if path := pathOf(env); !slices.Contains(filepath.SplitList(path), toolsDir) {
		env = setenv(env, "PATH="+strings.TrimSuffix(path, ":")+":"+toolsDir)
	}
	if req.TTY && !req.Detach {
		env = setenv(env, "TERM=xterm-256color")
	}
	for _, kv := range req.Env {
		env = setenv(env, kv)
	}
	return env
}

// setenv returns env with kv, replacing the variable of the same name.
func setenv(env []string, kv string) []string {
	key, _, _ := strings.Cut(kv, "=")
	for i, old := range env {
		if k, _, _ := strings.Cut(old, "="); k == key {
			env[i] = kv
			return env
		}
	}
	return append(env, kv)
}

func pathOf(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			return v
		}
	}
	return ""
}

// lookPath finds file as a shell would in path, resolving relative entries
// against dir. A name with a slash is used as it is.
func lookPath(file, path, dir string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil // if it cannot run, Start says why
	}
	for _, d := range filepath.SplitList(path) {
		p := filepath.Join(d, file)
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && unix.Access(p, unix.X_OK) == nil {
			return p, nil
		}
	}
	return "", &exec.Error{Name: file, Err: exec.ErrNotFound}
}
