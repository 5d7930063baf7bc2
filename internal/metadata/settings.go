package metadata

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// SandboxSettings are what a sandbox's processes start with and the
// labels it is found by: set at create, changed by SetSandboxSettings,
// copied to its forks. cairnd checks them before they are stored; the
// store keeps them as given.
type SandboxSettings struct {
	// Env are KEY=VALUE pairs every exec and service starts with, after
	// the image's Env (a key here wins) and before an exec's own.
	Env []string `json:"env,omitempty"`
	// User (user[:group] or uid[:gid]) and Workdir are the defaults of
	// execs and services; "" leaves the image's.
	User    string `json:"user,omitempty"`
	Workdir string `json:"workdir,omitempty"`
	// Labels are the user's key=value tags (cairn list --label k=v).
	Labels map[string]string `json:"labels,omitempty"`
	// Timeout is the longest the sandbox runs at a time, from each start
	// (or from the last change of it); 0: no limit. OnTimeout is what
	// then happens: OnTimeoutStop (""), OnTimeoutDelete or OnTimeoutSave.
	Timeout   time.Duration `json:"timeout,omitempty"`
	OnTimeout string        `json:"on_timeout,omitempty"`
	// Deadline is when its timeout ends while it runs; zero when none.
	Deadline time.Time `json:"deadline,omitzero"`
	// Idle: after this long without use (no exec, session or port
	// connection), the running sandbox goes to sleep: its session is
	// saved and it stops, Asleep set, until a use wakes it. 0: never.
	Idle   time.Duration `json:"idle,omitempty"`
	Asleep bool          `json:"asleep,omitempty"`
}

// What happens to a sandbox at its timeout.
const (
	OnTimeoutStop   = "stop"   // stopped, with its stop checkpoint
	OnTimeoutDelete = "delete" // deleted, with its final checkpoint
	OnTimeoutSave   = "save"   // its session saved (memory kept on disk) and stopped
)

// Equal reports whether s and o hold the same settings (a nil and an
// empty Env or Labels are the same).
func (s SandboxSettings) Equal(o SandboxSettings) bool {
	if s.User != o.User || s.Workdir != o.Workdir || !slices.Equal(s.Env, o.Env) || len(s.Labels) != len(o.Labels) ||
		s.Timeout != o.Timeout || s.OnTimeout != o.OnTimeout || !s.Deadline.Equal(o.Deadline) || s.Idle != o.Idle || s.Asleep != o.Asleep {
		return false
	}
	for k, v := range s.Labels {
		if w, ok := o.Labels[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Column is the stored form of s, a JSON object (both stores keep it in
// sandboxes.settings); ReadSettings reads it back.
func (s SandboxSettings) Column() (string, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("settings: %w", err)
	}
	return string(b), nil
}

// ReadSettings reads a stored settings column.
func ReadSettings(col string) (SandboxSettings, error) {
	var s SandboxSettings
	if err := json.Unmarshal([]byte(col), &s); err != nil {
		return s, fmt.Errorf("stored settings: %w", err)
	}
	return s, nil
}
