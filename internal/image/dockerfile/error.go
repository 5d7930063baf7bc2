package dockerfile

import (
	"fmt"
	"strings"
)

// Error is a problem with a Dockerfile: a syntax error found by Parse, or
// one found by Plan (a bad value, a refused instruction, the base image's
// config not found). Its Error() is "Dockerfile:LINE: MSG".
type Error struct {
	Line int    // the line where the instruction starts, 1-based; 0 for the file as a whole
	Msg  string // what is wrong, for a user
	Err  error  // optional cause (from the base callback), kept for errors.Is and errors.As
}

func (e *Error) Error() string {
	s := e.Msg
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	if e.Line <= 0 {
		return "Dockerfile: " + s
	}
	return fmt.Sprintf("Dockerfile:%d: %s", e.Line, s)
}

func (e *Error) Unwrap() error { return e.Err }

// errorf returns an *Error at line.
func errorf(line int, format string, args ...any) *Error {
	return &Error{Line: line, Msg: fmt.Sprintf(format, args...)}
}

// supported is the list of instructions cairn builds, as error messages
// give it (MAINTAINER is accepted but, being deprecated, not advertised).
var supported = []string{"FROM", "RUN", "COPY", "ADD", "ENV", "ARG", "WORKDIR", "USER", "EXPOSE", "CMD", "ENTRYPOINT", "LABEL"}

// notSupported is the error for an instruction (or a form of one, e.g.
// "COPY --from") cairn refuses.
func notSupported(line int, what string) *Error {
	return errorf(line, "%s is not supported by cairn image build (supported: %s)", what, strings.Join(supported, ", "))
}
