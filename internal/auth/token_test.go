package auth

import (
	"strings"
	"testing"
)

func TestTokenRoundTrip(t *testing.T) {
	seen := map[string]bool{}
	for range 50 {
		tok, id, hash, err := NewToken()
		if err != nil {
			t.Fatal(err)
		}
		if seen[id] {
			t.Fatalf("id %s twice", id)
		}
		seen[id] = true
		gotID, secret, err := ParseToken(tok)
		if err != nil || gotID != id || !ValidID(id) {
			t.Fatalf("ParseToken(%q) = %q, %v; want id %q", tok, gotID, err, id)
		}
		if !SecretMatches(secret, hash) {
			t.Fatal("the secret does not match its own hash")
		}
		if strings.Contains(hash, secret) || len(hash) != 64 {
			t.Fatalf("hash %q", hash)
		}
		last := byte('A')
		if secret[len(secret)-1] == 'A' {
			last = 'B'
		}
		other := secret[:len(secret)-1] + string(last)
		if SecretMatches(other, hash) {
			t.Fatal("another secret matches")
		}
	}
}

func TestParseTokenRefuses(t *testing.T) {
	tok, _, _, _ := NewToken()
	for _, bad := range []string{"", "cairn_", "cairn_abc_def", "other_" + tok[6:], tok[:len(tok)-2], tok + "x",
		strings.Replace(tok, "_", "-", 2), "cairn_ABCDEFGHIJKL_" + tok[19:], "cairn_abcdefghijk1_" + tok[19:]} {
		if _, _, err := ParseToken(bad); err == nil {
			t.Errorf("ParseToken(%q) accepted", bad)
		}
	}
}

func TestRoles(t *testing.T) {
	for _, tc := range []struct {
		have, need Role
		ok         bool
	}{
		{RoleRead, RoleRead, true}, {RoleRead, RoleMember, false}, {RoleMember, RoleRead, true},
		{RoleMember, RoleAdmin, false}, {RoleAdmin, RoleMember, true}, {RoleAdmin, RoleAdmin, true},
		{Role("root"), RoleRead, false}, {RoleAdmin, Role(""), false},
	} {
		if got := tc.have.Allows(tc.need); got != tc.ok {
			t.Errorf("%s allows %s: %v, want %v", tc.have, tc.need, got, tc.ok)
		}
	}
}
