// Package errdefs gives errors a stable category: an API code from package
// api. Code anywhere in cairnd returns errors made here (or wraps them with
// %w); the API edge turns them into an HTTP status and the JSON error shape
// once, with CodeOf.
package errdefs

import (
	"errors"
	"fmt"

	"github.com/cairn-sandbox/cairn/api"
)

// Error is an error with a stable API code.
type Error struct {
	Code    string // one of the api.Code… constants
	Message string // what a user reads; says what was wrong and, if useful, what to do
	Err     error  // optional cause, kept for errors.Is/As and logs
}

func (e *Error) Error() string {
	if e.Err != nil && e.Message == "" {
		return e.Err.Error()
	}
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// New returns an error with code and a formatted message.
func New(code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an error with code and a formatted message whose cause is err.
func Wrap(code string, err error, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// HasCode reports whether err's chain holds an *Error (CodeOf answers
// X01 for one that does not).
func HasCode(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

// CodeOf returns the code of the first *Error in err's chain, or
// api.CodeInternal when there is none.
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return api.CodeInternal
}

// Is reports whether err carries code.
func Is(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}
