// Package auth is who a request to cairnd's API speaks for: API tokens
// (their form, how they are made and checked), the roles they carry, and
// the credential a request is served under.
//
// A token is "cairn_" + its id + "_" + its secret. The id (12 lower-case
// base32 characters) is public: lists and the audit log show it. The
// secret (32 random bytes, base64url) is shown once, when the token is
// made; the store keeps only its SHA-256, which is enough for a secret of
// 256 random bits (no password stretching is needed), compared in
// constant time. docs/accounts.md says how tokens are used.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
)

// Role is what a token may do.
type Role string

// The roles, from least to most.
const (
	// RoleRead reads its account: lists, infos, logs, events; it
	// changes nothing.
	RoleRead Role = "read"
	// RoleMember works in its account: everything read does, and
	// creating, changing and deleting its sandboxes, checkpoints,
	// snapshots, ports and networks, pulling and building images.
	RoleMember Role = "member"
	// RoleAdmin manages the host: accounts, every account's tokens, and
	// what is shared by every account (deleting images).
	RoleAdmin Role = "admin"
)

// Valid reports whether r is a role.
func (r Role) Valid() bool { return r == RoleRead || r == RoleMember || r == RoleAdmin }

// rank orders the roles.
func (r Role) rank() int {
	switch r {
	case RoleRead:
		return 1
	case RoleMember:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// Allows reports whether a token of role r may do what needs role need.
func (r Role) Allows(need Role) bool { return r.rank() >= need.rank() && need.rank() > 0 }

const (
	tokenPrefix = "cairn_"
	idLen       = 12 // base32 characters: 60 bits
	secretBytes = 32
)

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// ErrMalformed is a bearer token that is not cairn's form.
var ErrMalformed = errors.New("not a cairn API token")

// NewToken returns a new token: the whole string to hand out once, its
// id and the hash of its secret to store.
func NewToken() (token, id, hash string, err error) {
	var idb [8]byte
	var secret [secretBytes]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return "", "", "", err
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return "", "", "", err
	}
	id = idEncoding.EncodeToString(idb[:])[:idLen]
	s := base64.RawURLEncoding.EncodeToString(secret[:])
	return tokenPrefix + id + "_" + s, id, HashSecret(s), nil
}

// ParseToken splits a token into its id and secret.
func ParseToken(token string) (id, secret string, err error) {
	rest, ok := strings.CutPrefix(token, tokenPrefix)
	if !ok || len(rest) < idLen+2 || rest[idLen] != '_' {
		return "", "", ErrMalformed
	}
	id, secret = rest[:idLen], rest[idLen+1:]
	if !validID(id) {
		return "", "", ErrMalformed
	}
	if b, err := base64.RawURLEncoding.DecodeString(secret); err != nil || len(b) != secretBytes {
		return "", "", ErrMalformed
	}
	return id, secret, nil
}

// validID reports whether id is a token id's form.
func validID(id string) bool {
	if len(id) != idLen {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// ValidID reports whether id can be a token's id (for a request naming
// one: token revoke ID).
func ValidID(id string) bool { return validID(id) }

// HashSecret is what the store keeps of a secret.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// SecretMatches reports, in constant time, whether secret is the one
// whose hash is stored.
func SecretMatches(secret, stored string) bool {
	got := HashSecret(secret)
	return subtle.ConstantTimeCompare([]byte(got), []byte(stored)) == 1
}
