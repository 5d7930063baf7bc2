package cli

import (
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/cairn-sandbox/cairn/internal/bounds"
)

// Numeric flags. Each checks its value when the command line is parsed,
// with package bounds (the same checks cairnd makes again): NaN, Inf,
// negative, overflowing and out-of-range values are refused with a V02
// error naming the flag and the range, as a usage error (exit 2). Add a
// new numeric flag with one of these, not with pflag's Int/Float.

// intFlag is an int flag within [lo, hi].
type intFlag struct {
	p      *int
	name   string
	lo, hi int64
}

// boundedIntVar defines --name, an int in [lo, hi] stored in p.
func boundedIntVar(f *pflag.FlagSet, p *int, name string, value int, lo, hi int64, usage string) {
	*p = value
	f.Var(&intFlag{p: p, name: name, lo: lo, hi: hi}, name, usage)
}

func (v *intFlag) String() string { return strconv.Itoa(*v.p) }
func (v *intFlag) Type() string   { return "int" }
func (v *intFlag) Set(s string) error {
	n, err := bounds.ParseInt("--"+v.name, s, v.lo, v.hi)
	if err != nil {
		return err
	}
	*v.p = int(n)
	return nil
}

// floatFlag is a float64 flag within [lo, hi], or 0 when zeroOK.
type floatFlag struct {
	p      *float64
	name   string
	lo, hi float64
	zeroOK bool
}

// boundedFloatVar defines --name, a decimal number in [lo, hi] (or 0 when
// zeroOK) stored in p.
func boundedFloatVar(f *pflag.FlagSet, p *float64, name string, lo, hi float64, zeroOK bool, usage string) {
	f.Var(&floatFlag{p: p, name: name, lo: lo, hi: hi, zeroOK: zeroOK}, name, usage)
}

func (v *floatFlag) String() string { return strconv.FormatFloat(*v.p, 'g', -1, 64) }
func (v *floatFlag) Type() string   { return "number" }
func (v *floatFlag) Set(s string) error {
	n, err := bounds.ParseFloat("--"+v.name, s, v.lo, v.hi, v.zeroOK)
	if err != nil {
		return err
	}
	*v.p = n
	return nil
}

// sizeFlag is a size flag ("512M") within [lo, hi] bytes, kept as the
// text given: that is what the API carries. "" is the default.
type sizeFlag struct {
	p      *string
	name   string
	lo, hi int64
}

// boundedSizeVar defines --name, a size in [lo, hi] bytes whose text is
// stored in p.
func boundedSizeVar(f *pflag.FlagSet, p *string, name string, lo, hi int64, usage string) {
	f.Var(&sizeFlag{p: p, name: name, lo: lo, hi: hi}, name, usage)
}

func (v *sizeFlag) String() string { return *v.p }
func (v *sizeFlag) Type() string   { return "size" }
func (v *sizeFlag) Set(s string) error {
	if s == "" {
		*v.p = "" // the default
		return nil
	}
	if _, err := bounds.ParseSize("--"+v.name, s, v.lo, v.hi); err != nil {
		return err
	}
	*v.p = s
	return nil
}

// durationFlag is a duration flag ("15m") within [lo, hi], a whole number
// of step, kept as the text given.
type durationFlag struct {
	p            *string
	name         string
	lo, hi, step time.Duration
}

// boundedDurationVar defines --name, a duration in [lo, hi] and a whole
// number of step, whose text is stored in p.
func boundedDurationVar(f *pflag.FlagSet, p *string, name string, lo, hi, step time.Duration, usage string) {
	f.Var(&durationFlag{p: p, name: name, lo: lo, hi: hi, step: step}, name, usage)
}

func (v *durationFlag) String() string { return *v.p }
func (v *durationFlag) Type() string   { return "duration" }
func (v *durationFlag) Set(s string) error {
	if s == "" {
		*v.p = "" // the default
		return nil
	}
	if _, err := bounds.ParseDuration("--"+v.name, s, v.lo, v.hi, v.step); err != nil {
		return err
	}
	*v.p = s
	return nil
}
