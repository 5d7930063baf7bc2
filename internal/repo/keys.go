package repo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/cairn-sandbox/cairn/internal/repo/crypto"
)

// SaveKey seals key under passphrase (or a key file's bytes) and stores the
// slot in every location, so that the key can be recovered from a location
// and the passphrase alone.
func SaveKey(ctx context.Context, key *crypto.Key, passphrase []byte, kdf crypto.KDFParams, locs ...Location) error {
	slot, err := crypto.SealKey(key, passphrase, kdf)
	if err != nil {
		return err
	}
	var rnd [16]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	name := keysDir + hex.EncodeToString(rnd[:])
	for _, l := range locs {
		if err := l.Backend.Save(ctx, name, slot); err != nil {
			return fmt.Errorf("save key slot in %s: %w", l.Name, err)
		}
	}
	return nil
}

// LoadKey recovers the master key from the first slot in loc that opens with
// passphrase; crypto.ErrWrongPassphrase if none does.
func LoadKey(ctx context.Context, loc Location, passphrase []byte) (*crypto.Key, error) {
	infos, err := loc.Backend.List(ctx, keysDir)
	if err != nil {
		return nil, fmt.Errorf("list key slots in %s: %w", loc.Name, err)
	}
	for _, info := range infos {
		slot, err := loc.Backend.Load(ctx, info.Name)
		if err != nil {
			return nil, fmt.Errorf("load key slot: %w", err)
		}
		key, err := crypto.OpenKey(slot, passphrase)
		if errors.Is(err, crypto.ErrWrongPassphrase) {
			continue
		}
		return key, err
	}
	return nil, crypto.ErrWrongPassphrase
}
