package crypto

import (
	"bytes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/crypto/scrypt"
)

// KDFParams are scrypt's cost parameters for a key slot.
type KDFParams struct {
	LogN uint8 // N = 2^LogN
	R, P uint32
}

// DefaultKDF costs about 128 MiB and a fraction of a second per unlock.
var DefaultKDF = KDFParams{LogN: 17, R: 8, P: 1}

// ErrWrongPassphrase means a key slot did not open with the passphrase given.
var ErrWrongPassphrase = errors.New("wrong passphrase or key file")

const (
	slotMagic   = "cairnkey"
	slotVersion = 1
	saltSize    = 16
	slotHeader  = len(slotMagic) + 1 + 1 + 4 + 4 + saltSize
	// SlotSize is the size of a sealed key slot.
	SlotSize = slotHeader + Overhead + KeySize
)

var slotAD = []byte("cairn/v1/key-slot")

// SealKey seals k under a key derived from passphrase (a passphrase or the
// bytes of a key file) with scrypt.
func SealKey(k *Key, passphrase []byte, p KDFParams) ([]byte, error) {
	hdr := make([]byte, 0, slotHeader)
	hdr = append(hdr, slotMagic...)
	hdr = append(hdr, slotVersion, p.LogN)
	hdr = binary.LittleEndian.AppendUint32(hdr, p.R)
	hdr = binary.LittleEndian.AppendUint32(hdr, p.P)
	salt := make([]byte, saltSize)
	if _, err := rand.Read(salt); err != nil {
		return nil, fmt.Errorf("salt: %w", err)
	}
	hdr = append(hdr, salt...)
	aead, err := slotAEAD(passphrase, salt, p)
	if err != nil {
		return nil, err
	}
	sealed, err := seal(aead, k[:], slotAD)
	if err != nil {
		return nil, err
	}
	return append(hdr, sealed...), nil
}

// OpenKey opens a slot made by SealKey.
func OpenKey(slot, passphrase []byte) (*Key, error) {
	if len(slot) != SlotSize || !bytes.HasPrefix(slot, []byte(slotMagic)) {
		return nil, errors.New("not a cairn key slot")
	}
	rest := slot[len(slotMagic):]
	if rest[0] != slotVersion {
		return nil, fmt.Errorf("key slot version %d not supported", rest[0])
	}
	p := KDFParams{LogN: rest[1], R: binary.LittleEndian.Uint32(rest[2:]), P: binary.LittleEndian.Uint32(rest[6:])}
	if p.LogN < 1 || p.LogN > 22 || p.R < 1 || p.R > 32 || p.P < 1 || p.P > 16 {
		return nil, fmt.Errorf("key slot has unreasonable scrypt parameters %+v", p)
	}
	salt := rest[10 : 10+saltSize]
	aead, err := slotAEAD(passphrase, salt, p)
	if err != nil {
		return nil, err
	}
	b, err := open(aead, slot[slotHeader:], slotAD)
	if err != nil {
		return nil, ErrWrongPassphrase
	}
	var k Key
	copy(k[:], b)
	return &k, nil
}

func slotAEAD(passphrase, salt []byte, p KDFParams) (cipher.AEAD, error) {
	kek, err := scrypt.Key(passphrase, salt, 1<<p.LogN, int(p.R), int(p.P), KeySize)
	if err != nil {
		return nil, fmt.Errorf("scrypt: %w", err)
	}
	return newAEAD(kek)
}
