package initd

import (
	"encoding/json"
	"fmt"
	"os/user"
	"strconv"
	"strings"
	"syscall"

	"github.com/cairn-sandbox/cairn/api"
)

// Image defaults. cairnd passes the working directory and user of a
// sandbox's image (its OCI config) to cairn-init in its environment;
// they are the defaults of every command and service, and are not passed
// on to them. (The image's Env is in that environment already.)
const (
	envImageDir  = "CAIRN_IMAGE_WORKDIR"
	envImageUser = "CAIRN_IMAGE_USER"
)

// Sandbox defaults. cairnd passes the sandbox's own settings (cairn
// create --env/--user/--workdir) too, as they were at its start: they are
// the defaults of its services, after the image's. A command cairnd runs
// comes with the settings as they are now (cairnd fills them in), so
// commands do not get these.
const (
	envSandboxEnv  = "CAIRN_SANDBOX_ENV" // a JSON array of KEY=VALUE
	envSandboxDir  = "CAIRN_SANDBOX_WORKDIR"
	envSandboxUser = "CAIRN_SANDBOX_USER"
)

// imageDefaults takes the image defaults and the sandbox defaults out of
// base: the environment commands get, and the default dir and user.
func imageDefaults(base []string) (env []string, dir, usr string) {
	env = make([]string, 0, len(base))
	for _, kv := range base {
		switch k, v, _ := strings.Cut(kv, "="); k {
		case envImageDir:
			dir = v
		case envImageUser:
			usr = v
		case envSandboxEnv, envSandboxDir, envSandboxUser:
		default:
			env = append(env, kv)
		}
	}
	return env, dir, usr
}

// withSandboxDefaults fills a service's request from the sandbox
// defaults in base: their environment first (the service's own wins),
// their dir and user unless it names them. A value cairn-init cannot read
// is left out, with the rest kept.
func withSandboxDefaults(base []string, req api.ExecRequest) api.ExecRequest {
	var env []string
	for _, kv := range base {
		switch k, v, _ := strings.Cut(kv, "="); k {
		case envSandboxEnv:
			json.Unmarshal([]byte(v), &env)
		case envSandboxDir:
			if req.Dir == "" {
				req.Dir = v
			}
		case envSandboxUser:
			if req.User == "" {
				req.User = v
			}
		}
	}
	if len(env) > 0 {
		req.Env = append(env, req.Env...)
	}
	return req
}

// identity is who a command runs as.
type identity struct {
	cred *syscall.Credential // nil: cairn-init's own (root)
	home string              // "" when unknown
}

// lookupUser resolves spec, "user", "uid", "user:group" or "uid:gid" (as
// an OCI image config's User), against the sandbox's /etc/passwd and
// /etc/group. A numeric uid need not exist (its group is then 0, as
// Docker does); a name must.
func lookupUser(spec string) (identity, error) {
	if spec == "" {
		return identity{}, nil
	}
	name, group, hasGroup := strings.Cut(spec, ":")
	var id identity
	uid, gid := uint32(0), uint32(0)
	var u *user.User
	if n, err := strconv.ParseUint(name, 10, 32); err == nil {
		uid = uint32(n)
		if found, err := user.LookupId(name); err == nil {
			u = found
		}
	} else {
		found, err := user.Lookup(name)
		if err != nil {
			return identity{}, fmt.Errorf("exec: user %q: not in the sandbox's /etc/passwd", name)
		}
		u = found
		n, _ := strconv.ParseUint(u.Uid, 10, 32)
		uid = uint32(n)
	}
	var groups []uint32
	if u != nil {
		n, _ := strconv.ParseUint(u.Gid, 10, 32)
		gid = uint32(n)
		id.home = u.HomeDir
		if ids, err := u.GroupIds(); err == nil {
			for _, g := range ids {
				if n, err := strconv.ParseUint(g, 10, 32); err == nil && uint32(n) != gid {
					groups = append(groups, uint32(n))
				}
			}
		}
	}
	if hasGroup {
		if n, err := strconv.ParseUint(group, 10, 32); err == nil {
			gid = uint32(n)
		} else {
			g, err := user.LookupGroup(group)
			if err != nil {
				return identity{}, fmt.Errorf("exec: group %q: not in the sandbox's /etc/group", group)
			}
			n, _ := strconv.ParseUint(g.Gid, 10, 32)
			gid = uint32(n)
		}
		groups = nil // an explicit group is the only one, as in Docker
	}
	if groups == nil {
		groups = []uint32{}
	}
	id.cred = &syscall.Credential{Uid: uid, Gid: gid, Groups: groups}
	return id, nil
}
