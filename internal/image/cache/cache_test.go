package cache

import (
	"strings"
	"testing"
)

// Step keys carry their account, layer keys none; a step key of no
// account (what an older cairn made) is no valid key.
func TestKeys(t *testing.T) {
	h := strings.Repeat("ab", 32)
	for key, want := range map[string]struct {
		valid   bool
		account int64
	}{
		LayersKey(h):                   {true, 0},
		StepKey(1, h):                  {true, 1},
		StepKey(9007199254740993, h):   {true, 9007199254740993},
		"step-" + h:                    {false, 0},
		StepKey(0, h):                  {false, 0},
		StepKey(-4, h):                 {false, 0},
		"step-01-" + h:                 {false, 0},
		"step-1-" + h[:63]:             {false, 0},
		"layers-1-" + h:                {false, 0},
		"other-" + h:                   {false, 0},
		"step-1-" + strings.ToUpper(h): {false, 0},
		"../step-1-" + h:               {false, 0},
	} {
		if got := ValidKey(key); got != want.valid {
			t.Errorf("ValidKey(%q) = %v", key, got)
		}
		if want.valid {
			if got := accountOf(key); got != want.account {
				t.Errorf("accountOf(%q) = %d, want %d", key, got, want.account)
			}
		}
	}
	if StepKey(1, h) == StepKey(2, h) {
		t.Error("two accounts' keys of one step are the same")
	}
}
