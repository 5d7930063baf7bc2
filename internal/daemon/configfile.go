package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/cairn-sandbox/cairn/internal/localtier"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/offsite"
)

// File is cairnd's config file (--config), JSON. Today it holds the
// accounts' off-site settings, by account name (an account named here
// need not exist yet: its settings hold from its creation on).
// docs/offsite.md shows an example.
type File struct {
	Accounts map[string]AccountFile `json:"accounts"`
}

// AccountFile is one account's part of the config file.
type AccountFile struct {
	Offsite offsite.Config `json:"offsite"`
	// Local is how long local copies of what off-site holds are kept
	// (docs/offsite.md#the-local-tier).
	Local localtier.Policy `json:"local"`
}

// LoadFile reads the config file at path into cfg. Unknown fields and
// names that are no account's name are errors, so a typo does not
// silently fall back to a default.
func LoadFile(path string, cfg *Config) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	var f File
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	cfg.Offsite = map[string]offsite.Config{}
	cfg.LocalTier = map[string]localtier.Policy{}
	for name, a := range f.Accounts {
		if err := metadata.ValidateAccountName(name); err != nil {
			return fmt.Errorf("config %s: account %q: %w", path, name, err)
		}
		cfg.Offsite[name] = a.Offsite
		cfg.LocalTier[name] = a.Local
	}
	return nil
}
