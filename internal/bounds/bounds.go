// Package bounds checks numbers that come from a user or a request: flag
// values in the CLI and fields of API requests in cairnd (which must not
// trust the CLI to have checked). Every check rejects NaN, infinities,
// values below or above the allowed range and values that do not fit in
// their type, with a V02 error (api.CodeInvalidArgument) whose message
// names the flag or field, repeats the value as given and says the range:
//
//	invalid --memory "NaN": a size from 64MiB to 16TiB, e.g. 512M
//
// Parsing is exact: sizes are read as decimal digits, never through a
// float, so "4611686018427387904" is 4 EiB and not a rounding of it.
package bounds

import (
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// invalid returns the V02 error for value of field: "invalid FIELD VALUE:
// WANT".
func invalid(field, value, want string) error {
	return errdefs.New(api.CodeInvalidArgument, "invalid %s %s: %s", field, value, want)
}

// Float checks a number field got: finite and within [lo, hi]. zeroOK
// also allows 0 (for "no limit"), whatever lo is.
func Float(field string, v, lo, hi float64, zeroOK bool) error {
	if v == 0 && zeroOK {
		return nil
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v < lo || v > hi {
		return invalid(field, strconv.FormatFloat(v, 'g', -1, 64), floatRange(lo, hi, zeroOK))
	}
	return nil
}

// ParseFloat parses a decimal number ("1.5", "2") for field and checks it
// as Float does. Hex, exponents, NaN and Inf are refused.
func ParseFloat(field, s string, lo, hi float64, zeroOK bool) (float64, error) {
	want := floatRange(lo, hi, zeroOK)
	if !isDecimal(s) {
		return 0, invalid(field, strconv.Quote(s), want)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, invalid(field, strconv.Quote(s), want)
	}
	if err := Float(field, v, lo, hi, zeroOK); err != nil {
		return 0, invalid(field, strconv.Quote(s), want)
	}
	return v, nil
}

func floatRange(lo, hi float64, zeroOK bool) string {
	s := "a number from " + strconv.FormatFloat(lo, 'g', -1, 64) + " to " + strconv.FormatFloat(hi, 'g', -1, 64)
	if zeroOK {
		s += ", or 0 for no limit"
	}
	return s
}

// isDecimal reports whether s is digits with at most one '.', and at
// least one digit.
func isDecimal(s string) bool {
	digits, dots := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			dots++
		default:
			return false
		}
	}
	return digits > 0 && dots <= 1
}

// Int checks a whole number field got: within [lo, hi].
func Int(field string, v, lo, hi int64) error {
	if v < lo || v > hi {
		return invalid(field, strconv.FormatInt(v, 10), intRange(lo, hi))
	}
	return nil
}

// ParseInt parses a whole number in decimal for field ("42", "-3") and
// checks it is within [lo, hi]. Signs other than a leading '-', spaces,
// fractions and exponents are refused, as are numbers that overflow.
func ParseInt(field, s string, lo, hi int64) (int64, error) {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, invalid(field, strconv.Quote(s), intRange(lo, hi))
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < lo || v > hi {
		return 0, invalid(field, strconv.Quote(s), intRange(lo, hi))
	}
	return v, nil
}

func intRange(lo, hi int64) string {
	return "a whole number from " + strconv.FormatInt(lo, 10) + " to " + strconv.FormatInt(hi, 10)
}

// Size suffixes: powers of 1024.
var sizeUnits = map[string]int64{
	"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50,
}

// ParseSize parses a size for field: a number of bytes, or a number
// (fractions allowed: "1.5G") with a suffix K, M, G, T or P, powers of
// 1024, in either case and optionally followed by "i", "B" or "iB"
// ("512M", "2GiB", "10kb"). A fraction of a byte is dropped. The size must
// be within [lo, hi] bytes.
func ParseSize(field, s string, lo, hi int64) (int64, error) {
	want := "a size from " + FormatSize(lo) + " to " + FormatSize(hi) + ", e.g. 512M"
	bad := func() (int64, error) { return 0, invalid(field, strconv.Quote(s), want) }
	num, mult, ok := splitSize(s)
	if !ok || !isDecimal(num) {
		return bad()
	}
	whole, frac, _ := strings.Cut(num, ".")
	if whole == "" {
		whole = "0"
	}
	// Exact arithmetic: (whole·10^k + frac)·mult / 10^k, rounded down.
	n, _ := new(big.Int).SetString(whole+frac, 10)
	n.Mul(n, big.NewInt(mult))
	n.Quo(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(len(frac))), nil))
	if !n.IsInt64() || n.Int64() < lo || n.Int64() > hi {
		return bad()
	}
	return n.Int64(), nil
}

// splitSize splits "1.5GiB" into "1.5" and 1<<30.
func splitSize(s string) (num string, mult int64, ok bool) {
	t := strings.ToUpper(s)
	switch {
	case strings.HasSuffix(t, "IB"):
		t = t[:len(t)-2]
		if t == "" || t[len(t)-1] < 'A' {
			return "", 0, false // "5iB"
		}
	case strings.HasSuffix(t, "I"):
		t = t[:len(t)-1]
		if t == "" || t[len(t)-1] < 'A' {
			return "", 0, false // "5i"
		}
	case strings.HasSuffix(t, "B"):
		t = t[:len(t)-1]
	}
	unit := ""
	if n := len(t); n > 0 && t[n-1] >= 'A' && t[n-1] <= 'Z' {
		unit, t = t[n-1:], t[:n-1]
	}
	mult, ok = sizeUnits[unit]
	return t, mult, ok
}

// FormatSize renders a size in the largest binary unit not above it:
// "64MiB", "16TiB", "1000B", "1.5GiB" (one decimal, rounded down, when not
// a whole number of the unit).
func FormatSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for i < len(units)-1 && n>>(10*(i+1)) > 0 {
		i++
	}
	m := int64(1) << (10 * i)
	if n%m == 0 || n < 0 {
		return strconv.FormatInt(n/m, 10) + units[i]
	}
	tenths := min(9, int64(float64(n%m)/float64(m)*10)) // (n%m)*10 could overflow
	return strconv.FormatInt(n/m, 10) + "." + strconv.FormatInt(tenths, 10) + units[i]
}

// ParseDuration parses a duration for field ("90s", "15m", "1h30m", as
// time.ParseDuration reads them) that must be a whole number of step
// (time.Second: no fractions of a second) within [lo, hi].
func ParseDuration(field, s string, lo, hi, step time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < lo || d > hi || (step > 0 && d%step != 0) {
		want := "a duration from " + lo.String() + " to " + hi.String()
		if step == time.Second {
			want = "a whole number of seconds from " + shortDuration(lo) + " to " + shortDuration(hi)
		}
		return 0, invalid(field, strconv.Quote(s), want+", e.g. 5m or 1h")
	}
	return d, nil
}

// shortDuration renders d without zero parts: "1m", "24h", "90s".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
