package initd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/api"
)

// Where services are defined and log, inside the sandbox.
const (
	DefaultServicesDir = "/etc/cairn/services"
	DefaultLogDir      = "/var/log/cairn"
)

// maxServiceFile bounds the size of one service definition file.
const maxServiceFile = 64 << 10

var serviceName = regexp.MustCompile(api.ServiceNamePattern)

// loadServices reads every definition in dir, *.json but for names that
// start with a dot, in the order of their file names. A file that cannot
// be read or is not a valid definition is logged and skipped, and so is a
// second definition of a name. A missing dir means no services.
func loadServices(dir string, log *slog.Logger) []api.ServiceDefinition {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			log.Warn("cannot read services", "dir", dir, "err", err)
		}
		return nil
	}
	var defs []api.ServiceDefinition
	seen := make(map[string]string) // name → file; entries are sorted by file name
	for _, e := range entries {
		file := e.Name()
		if !strings.HasSuffix(file, ".json") || strings.HasPrefix(file, ".") {
			continue
		}
		path := filepath.Join(dir, file)
		def, err := readService(path)
		if err == nil && seen[def.Name] != "" {
			err = fmt.Errorf("service %q is already defined in %s", def.Name, seen[def.Name])
		}
		if err != nil {
			log.Warn("service skipped", "file", path, "err", err)
			continue
		}
		seen[def.Name] = file
		defs = append(defs, def)
	}
	return defs
}

// readService reads and checks one definition file. It opens the file
// without blocking, so that a FIFO cannot hang the boot.
func readService(path string) (api.ServiceDefinition, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return api.ServiceDefinition{}, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return api.ServiceDefinition{}, err
	} else if !fi.Mode().IsRegular() {
		return api.ServiceDefinition{}, errors.New("not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, maxServiceFile+1))
	if err != nil {
		return api.ServiceDefinition{}, err
	}
	if len(b) > maxServiceFile {
		return api.ServiceDefinition{}, fmt.Errorf("larger than %d bytes", maxServiceFile)
	}
	return parseService(b)
}

// parseService decodes a definition strictly (no unknown fields, nothing
// after it), checks it and fills in the default restart policy.
func parseService(b []byte) (api.ServiceDefinition, error) {
	var def api.ServiceDefinition
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&def); err != nil {
		return def, fmt.Errorf("bad JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return def, errors.New("bad JSON: data after the definition")
	}
	if err := checkService(&def); err != nil {
		return def, err
	}
	return def, nil
}

// checkService says what is wrong with def, and sets its default restart
// policy.
func checkService(def *api.ServiceDefinition) error {
	if !serviceName.MatchString(def.Name) {
		return fmt.Errorf("invalid name %q: must match %s", def.Name, api.ServiceNamePattern)
	}
	if len(def.Cmd) == 0 || def.Cmd[0] == "" {
		return errors.New("no cmd")
	}
	for _, arg := range def.Cmd {
		if strings.ContainsRune(arg, 0) {
			return errors.New("cmd: NUL byte in an argument")
		}
	}
	for k, v := range def.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return fmt.Errorf("env: invalid variable %q", k)
		}
	}
	if def.Dir != "" && !filepath.IsAbs(def.Dir) {
		return fmt.Errorf("dir %q is not an absolute path", def.Dir)
	}
	switch def.Restart {
	case "":
		def.Restart = api.ServiceRestartOnFailure
	case api.ServiceRestartAlways, api.ServiceRestartOnFailure, api.ServiceRestartNo:
	default:
		return fmt.Errorf("restart %q: must be %s, %s or %s", def.Restart,
			api.ServiceRestartAlways, api.ServiceRestartOnFailure, api.ServiceRestartNo)
	}
	return nil
}

// execRequest is what a service runs, as an exec request: the same
// defaults apply (see command).
func execRequest(def api.ServiceDefinition) api.ExecRequest {
	env := make([]string, 0, len(def.Env))
	for _, k := range slices.Sorted(maps.Keys(def.Env)) {
		env = append(env, k+"="+def.Env[k])
	}
	return api.ExecRequest{Command: def.Cmd, Env: env, Dir: def.Dir}
}
