package sandbox

import (
	"context"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Bounds of a sandbox's settings: they are stored with its row and sent
// with every exec.
const (
	maxEnv         = 256
	maxEnvBytes    = 64 << 10
	maxLabels      = 64
	maxLabelKey    = 63
	maxLabelValue  = 255
	maxSettingPath = 4096
)

// newSettings checks the settings a create gives.
func newSettings(req api.CreateSandboxRequest) (metadata.SandboxSettings, error) {
	set := metadata.SandboxSettings{User: req.User, Workdir: req.Workdir}
	var err error
	if set.Timeout, set.OnTimeout, err = parseTimeout(req.Timeout, req.OnTimeout); err != nil {
		return set, err
	}
	if set.Idle, err = parseIdle(req.Idle); err != nil {
		return set, err
	}
	if set.Env, err = setEnv(nil, req.Env); err != nil {
		return set, err
	}
	if set.Labels, err = setLabels(nil, req.Labels); err != nil {
		return set, err
	}
	return set, checkSettings(set)
}

// settingsChange reports whether req changes a sandbox's settings.
func settingsChange(req api.ConfigureSandboxRequest) bool {
	return req.Env != nil || req.UnsetEnv != nil || req.User != nil || req.Workdir != nil || req.Labels != nil || req.UnsetLabels != nil ||
		req.Timeout != "" || req.OnTimeout != "" || req.Idle != ""
}

// parseIdle reads an --idle ("0": never).
func parseIdle(idle string) (time.Duration, error) {
	d, _, err := parseTimeout(idle, "")
	if err != nil {
		return 0, errdefs.New(api.CodeInvalidArgument, "idle %q: a duration from %s to %s, such as 10m (0: never)", idle, api.MinTimeout, api.MaxTimeout)
	}
	return d, nil
}

// applySettingsChange returns cur with req's changes, checked.
//
// A timeout given starts again from now: its deadline is now plus it.
func applySettingsChange(cur metadata.SandboxSettings, req api.ConfigureSandboxRequest, now time.Time) (metadata.SandboxSettings, error) {
	next := metadata.SandboxSettings{Env: slices.Clone(cur.Env), User: cur.User, Workdir: cur.Workdir,
		Timeout: cur.Timeout, OnTimeout: cur.OnTimeout, Deadline: cur.Deadline, Idle: cur.Idle, Asleep: cur.Asleep}
	if req.Idle != "" {
		idle, err := parseIdle(req.Idle)
		if err != nil {
			return cur, err
		}
		next.Idle = idle
	}
	if req.Timeout != "" || req.OnTimeout != "" {
		timeout, on, err := parseTimeout(req.Timeout, req.OnTimeout)
		if err != nil {
			return cur, err
		}
		if req.OnTimeout != "" {
			next.OnTimeout = on
		}
		if req.Timeout != "" {
			next.Timeout = timeout
			next = armed(next, now)
		}
	}
	if len(cur.Labels) > 0 {
		next.Labels = map[string]string{}
		for k, v := range cur.Labels {
			next.Labels[k] = v
		}
	}
	for _, k := range req.UnsetEnv {
		if err := checkEnvKey(k); err != nil {
			return cur, err
		}
		next.Env = slices.DeleteFunc(next.Env, func(kv string) bool { return envKey(kv) == k })
	}
	var err error
	if next.Env, err = setEnv(next.Env, req.Env); err != nil {
		return cur, err
	}
	for _, k := range req.UnsetLabels {
		if err := checkLabelKey(k); err != nil {
			return cur, err
		}
		delete(next.Labels, k)
	}
	if next.Labels, err = setLabels(next.Labels, req.Labels); err != nil {
		return cur, err
	}
	if len(next.Labels) == 0 {
		next.Labels = nil
	}
	if len(next.Env) == 0 {
		next.Env = nil
	}
	if req.User != nil {
		next.User = *req.User
	}
	if req.Workdir != nil {
		next.Workdir = *req.Workdir
	}
	return next, checkSettings(next)
}

func envKey(kv string) string {
	k, _, _ := strings.Cut(kv, "=")
	return k
}

// setEnv sets each KEY=VALUE of add in env: a key env has is replaced
// where it is, a new one appended.
func setEnv(env, add []string) ([]string, error) {
	for _, kv := range add {
		k, _, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, errdefs.New(api.CodeInvalidArgument, "environment variable %q: give KEY=VALUE", kv)
		}
		if err := checkEnvKey(k); err != nil {
			return nil, err
		}
		if strings.ContainsRune(kv, 0) {
			return nil, errdefs.New(api.CodeInvalidArgument, "environment variable %s: its value holds a NUL byte", k)
		}
		if i := slices.IndexFunc(env, func(e string) bool { return envKey(e) == k }); i >= 0 {
			env[i] = kv
		} else {
			env = append(env, kv)
		}
	}
	return env, nil
}

func checkEnvKey(k string) error {
	switch {
	case k == "":
		return errdefs.New(api.CodeInvalidArgument, "an environment variable needs a name (KEY=VALUE)")
	case strings.HasPrefix(k, "CAIRN_"):
		return errdefs.New(api.CodeInvalidArgument, "environment variable %s: CAIRN_* are cairn's own", k)
	case strings.ContainsAny(k, "=\x00") || !utf8.ValidString(k) || strings.ContainsFunc(k, isControl):
		return errdefs.New(api.CodeInvalidArgument, "environment variable name %q: no '=', NUL or control characters", k)
	}
	return nil
}

// setLabels sets each label of add in labels.
func setLabels(labels, add map[string]string) (map[string]string, error) {
	for k, v := range add {
		if err := checkLabelKey(k); err != nil {
			return nil, err
		}
		if len(v) > maxLabelValue || !utf8.ValidString(v) || strings.ContainsFunc(v, isControl) {
			return nil, errdefs.New(api.CodeInvalidArgument, "label %s: a value is at most %d bytes of text without control characters", k, maxLabelValue)
		}
		if labels == nil {
			labels = map[string]string{}
		}
		labels[k] = v
	}
	return labels, nil
}

// checkLabelKey: 1-63 of a-z, A-Z, 0-9, '.', '_', '-', '/', starting with
// a letter or digit.
func checkLabelKey(k string) error {
	ok := k != "" && len(k) <= maxLabelKey
	for i, c := range k {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("._-/", c)) {
			ok = false
		}
	}
	if !ok {
		return errdefs.New(api.CodeInvalidArgument, "label name %q: 1-%d letters, digits, '.', '_', '-', '/', starting with a letter or digit", k, maxLabelKey)
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// checkSettings checks what the whole of set may be.
func checkSettings(set metadata.SandboxSettings) error {
	total := 0
	for _, kv := range set.Env {
		total += len(kv)
	}
	switch {
	case len(set.Env) > maxEnv || total > maxEnvBytes:
		return errdefs.New(api.CodeInvalidArgument, "at most %d environment variables of %d bytes in all", maxEnv, maxEnvBytes)
	case len(set.Labels) > maxLabels:
		return errdefs.New(api.CodeInvalidArgument, "at most %d labels", maxLabels)
	case set.Workdir != "" && (!path.IsAbs(set.Workdir) || len(set.Workdir) > maxSettingPath || strings.ContainsRune(set.Workdir, 0)):
		return errdefs.New(api.CodeInvalidArgument, "working directory %q: an absolute path inside the sandbox", set.Workdir)
	case len(set.User) > 256 || strings.ContainsFunc(set.User, isControl) || strings.ContainsAny(set.User, " /"):
		return errdefs.New(api.CodeInvalidArgument, "user %q: user[:group] or uid[:gid]", set.User)
	}
	return nil
}

// updateSettings changes sandbox id's settings by fn, on the row as it is
// now. This cairnd's writers of settings (config, a start, sleep, wake) go
// one at a time, so none undoes another's change.
func (m *Manager) updateSettings(ctx context.Context, id string, fn func(*metadata.SandboxSettings)) error {
	_, err := m.changeSettings(ctx, id, func(cur metadata.SandboxSettings) (metadata.SandboxSettings, error) {
		fn(&cur)
		return cur, nil
	})
	return err
}

// changeSettings is updateSettings with a change that can be refused;
// it returns the settings stored.
func (m *Manager) changeSettings(ctx context.Context, id string, change func(metadata.SandboxSettings) (metadata.SandboxSettings, error)) (metadata.SandboxSettings, error) {
	m.settingsMu.Lock()
	defer m.settingsMu.Unlock()
	sb, err := m.cfg.Store.SandboxByID(ctx, id)
	if err != nil {
		return metadata.SandboxSettings{}, err
	}
	next, err := change(sb.Settings)
	if err != nil {
		return metadata.SandboxSettings{}, err
	}
	return next, m.cfg.Store.SetSandboxSettings(ctx, id, next)
}

// withSettings fills an exec's defaults from the sandbox's settings: its
// environment first (the exec's own variables win), its user and working
// directory unless the exec gives them.
func withSettings(req api.ExecRequest, set metadata.SandboxSettings) api.ExecRequest {
	if len(set.Env) > 0 {
		req.Env = append(slices.Clone(set.Env), req.Env...)
	}
	if req.User == "" {
		req.User = set.User
	}
	if req.Dir == "" {
		req.Dir = set.Workdir
	}
	return req
}
