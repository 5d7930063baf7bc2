package cli

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/cairn-sandbox/cairn/api"
)

// settingsHelp explains the process defaults and labels of cairn create
// and cairn config.
const settingsHelp = `--env KEY=VALUE (repeatable) sets a variable every exec and service in the
sandbox starts with, after the image's (an exec's own --env wins); --user
user[:group] and --workdir DIR are their defaults instead of the image's.
--label key=value (repeatable) tags the sandbox ("cairn list --label
key=value" finds it). --timeout DURATION is the longest it runs at a time,
counted from each start (1s to 720h); then --on-timeout happens: stop
(default), delete (with its final checkpoint) or save (its session, memory
kept on disk, as "cairn stop --snapshot"). "cairn info" and "cairn list"
show when it ends; "cairn config NAME --timeout D" counts again from now.
--idle DURATION puts it to sleep after that long without an exec or a port
connection: its session is saved (memory kept on disk, no host memory
used) and "cairn list" shows it sleeping; the next exec or port connection
wakes it, waiting while its processes resume where they were.`

// settingsFlags are the flags of a sandbox's process defaults, labels
// and lifetime.
type settingsFlags struct {
	env, unsetEnv, labels, unlabels []string
	user, workdir                   string
	timeout, onTimeout, idle        string
}

// register adds the flags; config adds those that remove.
func (s *settingsFlags) register(f *pflag.FlagSet, config bool) {
	f.StringArrayVar(&s.env, "env", nil, "KEY=VALUE every exec and service starts with (repeatable)")
	f.StringVar(&s.user, "user", "", "default user[:group] of execs and services (default: the image's)")
	f.StringVar(&s.workdir, "workdir", "", "default working directory of execs and services (default: the image's)")
	f.StringArrayVar(&s.labels, "label", nil, "label key=value (repeatable)")
	f.StringVar(&s.idle, "idle", "", "sleep after this long without an exec or port connection, e.g. 10m: its session is saved, a use wakes it (0: never)")
	f.StringVar(&s.onTimeout, "on-timeout", "", "what happens at the timeout: stop, delete (with its final checkpoint), save (its session, memory kept) (default stop)")
	if config {
		f.StringVar(&s.timeout, "timeout", "", "the longest it runs, counted again from now, e.g. 2h (0: no limit)")
	} else {
		f.StringVar(&s.timeout, "timeout", "", "the longest it runs at a time, from each start, e.g. 2h (1s to 720h; default: no limit)")
	}
	if config {
		f.StringArrayVar(&s.unsetEnv, "unset-env", nil, "remove a variable set with --env (repeatable)")
		f.StringArrayVar(&s.unlabels, "unlabel", nil, "remove a label (repeatable)")
	}
}

// labelMap parses key=value labels ("key" alone: an empty value).
func labelMap(labels []string) map[string]string {
	if len(labels) == 0 {
		return nil
	}
	m := map[string]string{}
	for _, l := range labels {
		k, v, _ := strings.Cut(l, "=")
		m[k] = v
	}
	return m
}

// create fills req's settings.
func (s *settingsFlags) create(req *api.CreateSandboxRequest) {
	req.Env, req.User, req.Workdir, req.Labels = s.env, s.user, s.workdir, labelMap(s.labels)
	req.Timeout, req.OnTimeout, req.Idle = s.timeout, s.onTimeout, s.idle
}

// change fills req's settings from the flags given; it reports whether
// any was.
func (s *settingsFlags) change(f *pflag.FlagSet, req *api.ConfigureSandboxRequest) bool {
	req.Env, req.UnsetEnv, req.Labels, req.UnsetLabels = s.env, s.unsetEnv, labelMap(s.labels), s.unlabels
	req.Timeout, req.OnTimeout, req.Idle = s.timeout, s.onTimeout, s.idle
	if f.Changed("user") {
		req.User = &s.user
	}
	if f.Changed("workdir") {
		req.Workdir = &s.workdir
	}
	return req.Env != nil || req.UnsetEnv != nil || req.Labels != nil || req.UnsetLabels != nil || req.User != nil || req.Workdir != nil ||
		req.Timeout != "" || req.OnTimeout != "" || req.Idle != ""
}

// formatTimeout describes a sandbox's timeout: "2h0m0s, then stop · ends
// in 1h 59m", "-" for none.
func formatTimeout(now time.Time, sb api.Sandbox) string {
	if sb.TimeoutSeconds == 0 {
		return "-"
	}
	out := (time.Duration(sb.TimeoutSeconds) * time.Second).String() + ", then " + sb.OnTimeout
	if ends := formatEnds(now, sb); ends != "-" {
		out += " · ends " + ends
	}
	return out
}

// formatIdle is the idle time before a sandbox sleeps: "after 10m0s", "-".
func formatIdle(seconds int64) string {
	if seconds == 0 {
		return "-"
	}
	return "after " + (time.Duration(seconds) * time.Second).String() + " without use"
}

// formatEnds is when a running sandbox's timeout ends: "in 1h 59m", "-".
func formatEnds(now time.Time, sb api.Sandbox) string {
	if sb.EndsAt == nil {
		return "-"
	}
	left := sb.EndsAt.Sub(now)
	switch {
	case left <= 0:
		return "now"
	case left < time.Minute:
		return fmt.Sprintf("in %ds", int(left.Seconds()))
	case left < time.Hour:
		return fmt.Sprintf("in %dm", int(left.Minutes()))
	case left < 48*time.Hour:
		return fmt.Sprintf("in %dh %dm", int(left.Hours()), int(left.Minutes())%60)
	}
	return fmt.Sprintf("in %dd", int(left.Hours()/24))
}

// formatSettings describes a sandbox's process defaults and labels in a
// line.
func formatSettings(sb api.Sandbox) string {
	var parts []string
	if len(sb.Env) > 0 {
		parts = append(parts, "env "+strings.Join(sb.Env, " "))
	}
	if sb.User != "" {
		parts = append(parts, "user "+sb.User)
	}
	if sb.Workdir != "" {
		parts = append(parts, "workdir "+sb.Workdir)
	}
	if len(sb.Labels) > 0 {
		parts = append(parts, "labels "+formatLabels(sb.Labels))
	}
	if len(parts) == 0 {
		return "the image's defaults, no labels"
	}
	return strings.Join(parts, " · ")
}

// formatLabels writes labels as k=v, sorted by key.
func formatLabels(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		keys[i] = k + "=" + labels[k]
	}
	return strings.Join(keys, ",")
}
