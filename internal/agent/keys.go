package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-sandbox/cairn/internal/agentauth"
)

// ImageKeyFile is the name of the key file in a memory image's directory:
// the keys cairn-init held when its memory was saved, which a copy resumed
// from the image still holds.
const ImageKeyFile = "agent.key"

// ErrNoImageKey means a memory image has no key file: it was made by a
// cairn from before agents proved themselves, and its cairn-init cannot.
var ErrNoImageKey = errors.New("memory image has no agent key")

// keyring is what cairnd knows of the key a sandbox's cairn-init holds,
// kept in a key file (see docs/exec-protocol.md, "Keys"):
//
//   - Key: the key cairn-init holds, as far as cairnd knows.
//   - Next: a re-key in flight: recorded before it is sent, so that
//     cairn-init holds Key or Next whatever crashes; both are accepted.
//   - Inherited: Key came from a memory image (other copies resumed from
//     it hold it too): cairn-init gets a key of its own at its next
//     connection.
type keyring struct {
	Version   int    `json:"version"`
	Key       string `json:"key"`
	Next      string `json:"next,omitempty"`
	Inherited bool   `json:"inherited,omitempty"`
}

const keyringVersion = 1

// accepted returns the keys a proof may be made with: Key, then Next.
func (r keyring) accepted() []agentauth.Key {
	var out []agentauth.Key
	for _, s := range []string{r.Key, r.Next} {
		if k, err := agentauth.ParseKey([]byte(s)); err == nil {
			out = append(out, k)
		}
	}
	return out
}

// NewKeyFile makes a fresh key for a sandbox's next boot, records it in
// the key file at path (replacing what was there) and returns it, for
// cairn-init's standard input.
func NewKeyFile(path string) (agentauth.Key, error) {
	k := agentauth.NewKey()
	if err := writeKeyring(path, keyring{Version: keyringVersion, Key: k.String()}); err != nil {
		return agentauth.Key{}, err
	}
	return k, nil
}

// InheritKeyFile records in the key file at path the keys of the memory
// image in imageDir, for a sandbox about to resume from it; its
// cairn-init is re-keyed when it connects. ErrNoImageKey if the image has
// none.
func InheritKeyFile(imageDir, path string) error {
	r, err := readKeyring(filepath.Join(imageDir, ImageKeyFile))
	if errors.Is(err, os.ErrNotExist) {
		return ErrNoImageKey
	}
	if err != nil {
		return err
	}
	r.Inherited = true
	return writeKeyring(path, r)
}

// readKeyring reads a key file; one that holds no valid key is an error.
func readKeyring(path string) (keyring, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return keyring{}, err
	}
	var r keyring
	if err := json.Unmarshal(b, &r); err != nil {
		return keyring{}, fmt.Errorf("agent key file %s: %w", path, err)
	}
	if r.Version != keyringVersion {
		return keyring{}, fmt.Errorf("agent key file %s: unknown version %d", path, r.Version)
	}
	if _, err := agentauth.ParseKey([]byte(r.Key)); err != nil {
		return keyring{}, fmt.Errorf("agent key file %s: %w", path, err)
	}
	if r.Next != "" {
		if _, err := agentauth.ParseKey([]byte(r.Next)); err != nil {
			return keyring{}, fmt.Errorf("agent key file %s: next: %w", path, err)
		}
	}
	return r, nil
}

// writeKeyring replaces the file at path with r atomically and durably:
// a temporary file (mode 0600) written and synced, renamed over path, and
// the directory synced.
func writeKeyring(path string, r keyring) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".agent-key-*")
	if err != nil {
		return fmt.Errorf("write agent key file: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after the rename
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("write agent key file: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// SaveKeys writes the keys cairn-init may hold into the memory image
// directory dir (ImageKeyFile), for the copies resumed from it. Call it
// while the sandbox is paused for the image: then cairn-init holds one of
// them (a re-key is recorded before it is sent, and its old key dropped
// only after cairn-init acknowledged it).
func (h *Host) SaveKeys(dir string) error {
	h.keysMu.Lock()
	r := h.ring
	h.keysMu.Unlock()
	if r.Key == "" {
		return errors.New("save agent keys: cairnd holds no key for this sandbox")
	}
	r.Inherited = false // whoever resumes it decides
	return writeKeyring(filepath.Join(dir, ImageKeyFile), r)
}
