package dns

import (
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

func TestValidPattern(t *testing.T) {
	label63 := strings.Repeat("a", 63)
	long := strings.Repeat(label63+".", 4)[:254] // 254 characters
	for _, tc := range []struct {
		pattern string
		why     string // in the error; "" when valid
	}{
		{"example.com", ""},
		{"Example.COM.", ""},
		{"*.example.com", ""},
		{"*.com", ""},
		{"localhost", ""},
		{"_dmarc.example.com", ""},
		{"xn--bcher-kva.example", ""},
		{"a-b.c-d.example", ""},
		{label63 + ".example", ""},
		{long[:253], ""},

		{"", "empty"},
		{".", "empty"},
		{long, "longer than 253"},
		{label63 + "a.example", "longer than 63"},
		{"*", `"*" alone`},
		{"*.", `"*" alone`},
		{"**.example.com", `"*" may only be`},
		{"a.*.example.com", `"*" may only be`},
		{"*.*.example.com", `"*" may only be`},
		{"a*.example.com", `"*" may only be`},
		{"*example.com", `"*" may only be`},
		{"a..example.com", "empty label"},
		{".example.com", "empty label"},
		{"-a.example.com", "starts or ends with '-'"},
		{"a-.example.com", "starts or ends with '-'"},
		{"exa mple.com", "only letters"},
		{"exa\x00mple.com", "only letters"},
		{"bücher.example", "only letters"},
		{"example.com/path", "only letters"},
		{"http://example.com", "only letters"},
		{"10.0.0.1", "IP address"},
		{"::1", "IP address"},
		{"2001:db8::1", "IP address"},
		{"10.0.0.0/8", "only letters"},
		{"1.2.3", "is a number"},
		{"*.10", "is a number"},
	} {
		err := ValidPattern(tc.pattern)
		switch {
		case tc.why == "" && err != nil:
			t.Errorf("%q: %v", tc.pattern, err)
		case tc.why != "" && err == nil:
			t.Errorf("%q accepted; want %q", tc.pattern, tc.why)
		case tc.why != "" && !strings.Contains(err.Error(), tc.why):
			t.Errorf("%q: %v; want %q in it", tc.pattern, err, tc.why)
		case err != nil && !errdefs.Is(err, api.CodeInvalidArgument):
			t.Errorf("%q: code %s, want %s", tc.pattern, errdefs.CodeOf(err), api.CodeInvalidArgument)
		}
	}
}

func TestDecide(t *testing.T) {
	p := Policy{
		Allow: []string{"api.example.com", "*.allowed.test", "Mixed.Case.Test."},
		Deny:  []string{"*.example.com", "denied.test", "*.allowed.test", "not a pattern"},
	}
	for _, tc := range []struct {
		name string
		want Decision
	}{
		{"api.example.com", Allowed},
		{"api.example.com.", Allowed},
		{"API.EXAMPLE.COM", Allowed},
		{"x.api.example.com", Denied}, // under *.example.com; the allow is exact
		{"web.example.com", Denied},
		{"a.b.example.com", Denied},
		{"example.com", Neutral}, // *.example.com is strictly under
		{"notexample.com", Neutral},
		{"denied.test", Denied},
		{"x.denied.test", Neutral},
		{"a.allowed.test", Allowed}, // allow beats deny
		{"allowed.test", Neutral},
		{"mixed.case.test", Allowed},
		{"other.test", Neutral},
		{"", Neutral},
		{".", Neutral},
		{"com", Neutral},
		{"not a pattern", Neutral}, // an invalid pattern matches nothing
		{"ex\x00.api.example.com", Denied},
	} {
		if got := p.Decide(tc.name); got != tc.want {
			t.Errorf("Decide(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "not a pattern") {
		t.Errorf("Validate: %v", err)
	}
	if err := (Policy{Allow: []string{"a.test"}, Deny: []string{"*.test"}}).Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}
