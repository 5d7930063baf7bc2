package cli

import (
	"errors"
	"io"
	"strings"

	"golang.org/x/term"
)

// Questions cairn asks on its standard input: a secret (the token of
// cairn login), read without echo on a terminal; a yes or no; a name
// typed to confirm a deletion. Each reads one line and no more, so that
// answers piped one per line reach the question they are for.

// maxLine bounds a line read from standard input.
const maxLine = 64 << 10

// readLine reads one line from r, byte by byte (nothing past its newline
// is consumed), without the newline and surrounding space. io.EOF only
// when r ends before any byte.
func readLine(r io.Reader) (string, error) {
	var b strings.Builder
	var c [1]byte
	for b.Len() < maxLine {
		n, err := r.Read(c[:])
		if n == 1 {
			if c[0] == '\n' {
				break
			}
			b.WriteByte(c[0])
			continue
		}
		if errors.Is(err, io.EOF) && b.Len() > 0 {
			break
		}
		if err != nil {
			return "", err
		}
	}
	return strings.TrimSpace(b.String()), nil
}

// stdinTerminal reports whether standard input is a terminal, and its
// file descriptor.
func (g *globalOptions) stdinTerminal() (int, bool) {
	fd := terminalFd(g.stdin)
	return fd, fd >= 0
}

// readSecret asks for a secret: on a terminal with prompt on stderr and
// without echo (term.ReadPassword); from a pipe or a file, one line,
// without a prompt.
func (g *globalOptions) readSecret(prompt string) (string, error) {
	if fd, ok := g.stdinTerminal(); ok {
		g.eprintf("%s", prompt)
		b, err := term.ReadPassword(fd)
		g.eprintf("\n")
		if err != nil {
			return "", err
		}
		return strings.TrimSpace(string(b)), nil
	}
	line, err := readLine(g.stdin)
	if errors.Is(err, io.EOF) {
		return "", nil
	}
	return line, err
}

// confirm asks a yes/no question on stderr and reads the answer.
func confirm(g *globalOptions, question string) bool {
	g.eprintf("%s", question)
	line, _ := readLine(g.stdin)
	a := strings.ToLower(line)
	return a == "y" || a == "yes"
}
