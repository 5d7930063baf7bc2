// Package crypto holds the repository's keys: the per-account master key,
// the HKDF subkeys derived from it, keyed chunk ids and object names, AES-GCM
// sealing with random nonces, and key slots that keep the master key under a
// passphrase. docs/repository-format.md §1–§3 is the specification.
package crypto

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/zeebo/blake3"
)

// KeySize is the size of the master key and of every subkey.
const KeySize = 32

// Overhead is what sealing adds to a plaintext: the nonce and the GCM tag.
const Overhead = nonceSize + tagSize

const (
	nonceSize = 12
	tagSize   = 16
)

// ErrAuth means a sealed object failed authentication: it was damaged,
// forged, or sealed under another key.
var ErrAuth = errors.New("authentication failed (damaged data or wrong key)")

// Key is an account's master key.
type Key [KeySize]byte

// NewKey returns a fresh random master key.
func NewKey() (*Key, error) {
	var k Key
	if _, err := rand.Read(k[:]); err != nil {
		return nil, fmt.Errorf("new key: %w", err)
	}
	return &k, nil
}

// ID is a chunk id: the keyed BLAKE3 hash of a chunk's plaintext.
type ID [32]byte

// String returns the id in hex.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// Keys are the subkeys derived from a master key. They are safe for
// concurrent use.
type Keys struct {
	chunkID [KeySize]byte
	chunker [KeySize]byte
	names   [KeySize]byte
	data    cipher.AEAD
	meta    cipher.AEAD
}

// Derive computes the subkeys of k with HKDF-SHA256.
func (k *Key) Derive() (*Keys, error) {
	var ks Keys
	for _, d := range []struct {
		info string
		out  *[KeySize]byte
	}{
		{"cairn/v1/chunk-id", &ks.chunkID},
		{"cairn/v1/chunker", &ks.chunker},
		{"cairn/v1/names", &ks.names},
	} {
		if err := derive(k, d.info, d.out[:]); err != nil {
			return nil, err
		}
	}
	var err error
	if ks.data, err = deriveAEAD(k, "cairn/v1/data"); err != nil {
		return nil, err
	}
	if ks.meta, err = deriveAEAD(k, "cairn/v1/meta"); err != nil {
		return nil, err
	}
	return &ks, nil
}

func derive(k *Key, info string, out []byte) error {
	b, err := hkdf.Key(sha256.New, k[:], nil, info, len(out))
	if err != nil {
		return fmt.Errorf("derive %s: %w", info, err)
	}
	copy(out, b)
	return nil
}

func deriveAEAD(k *Key, info string) (cipher.AEAD, error) {
	var sub [KeySize]byte
	if err := derive(k, info, sub[:]); err != nil {
		return nil, err
	}
	return newAEAD(sub[:])
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("aes: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("gcm: %w", err)
	}
	return aead, nil
}

// ChunkID returns the keyed id of a chunk's plaintext.
func (ks *Keys) ChunkID(plaintext []byte) ID {
	var id ID
	keyedSum(ks.chunkID[:], plaintext, id[:])
	return id
}

// ChunkerKey is the key of the FastCDC gear table.
func (ks *Keys) ChunkerKey() []byte { return ks.chunker[:] }

// ObjectName returns the content name of a stored object: 64 hex digits
// that look random to anyone without the key.
func (ks *Keys) ObjectName(object []byte) string {
	var sum [32]byte
	keyedSum(ks.names[:], object, sum[:])
	return hex.EncodeToString(sum[:])
}

func keyedSum(key, data, out []byte) {
	h, err := blake3.NewKeyed(key)
	if err != nil {
		panic("blake3: keyed hash with a 32-byte key cannot fail: " + err.Error())
	}
	_, _ = h.Write(data)
	h.Sum(out[:0])
}

// SealData encrypts a chunk blob under the data key.
func (ks *Keys) SealData(plaintext, ad []byte) ([]byte, error) {
	return seal(ks.data, plaintext, ad)
}

// AppendSealData is SealData appending the sealed blob to dst, which must
// not overlap plaintext; it returns the extended buffer.
func (ks *Keys) AppendSealData(dst, plaintext, ad []byte) ([]byte, error) {
	return appendSeal(ks.data, dst, plaintext, ad)
}

// OpenData decrypts a blob sealed by SealData; ErrAuth if it does not authenticate.
func (ks *Keys) OpenData(sealed, ad []byte) ([]byte, error) { return open(ks.data, sealed, ad) }

// SealMeta encrypts repository metadata (manifests, indexes, heads) under the meta key.
func (ks *Keys) SealMeta(plaintext, ad []byte) ([]byte, error) {
	return seal(ks.meta, plaintext, ad)
}

// OpenMeta decrypts metadata sealed by SealMeta; ErrAuth if it does not authenticate.
func (ks *Keys) OpenMeta(sealed, ad []byte) ([]byte, error) { return open(ks.meta, sealed, ad) }

// seal returns nonce | ciphertext | tag with a fresh random nonce.
func seal(aead cipher.AEAD, plaintext, ad []byte) ([]byte, error) {
	return appendSeal(aead, make([]byte, 0, nonceSize+len(plaintext)+tagSize), plaintext, ad)
}

// appendSeal appends nonce | ciphertext | tag, with a fresh random nonce,
// to dst.
func appendSeal(aead cipher.AEAD, dst, plaintext, ad []byte) ([]byte, error) {
	start := len(dst)
	dst = append(dst, make([]byte, nonceSize)...)
	nonce := dst[start:]
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("nonce: %w", err)
	}
	return aead.Seal(dst, nonce, plaintext, ad), nil
}

func open(aead cipher.AEAD, sealed, ad []byte) ([]byte, error) {
	if len(sealed) < Overhead {
		return nil, fmt.Errorf("sealed object of %d bytes: %w", len(sealed), ErrAuth)
	}
	p, err := aead.Open(nil, sealed[:nonceSize], sealed[nonceSize:], ad)
	if err != nil {
		return nil, ErrAuth
	}
	return p, nil
}
