package buildctx

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strings"
)

// maxIgnoreLine bounds one line of a .dockerignore file.
const maxIgnoreLine = 64 << 10

// Ignore is a parsed .dockerignore file: which paths of a build context
// are left out of it. The zero value (and a nil *Ignore) excludes
// nothing.
type Ignore struct {
	patterns []pattern
}

// pattern is one line of a .dockerignore file.
type pattern struct {
	text      string   // as cleaned, without the "!"
	comps     []string // text split at "/"
	exception bool     // a "!" line: what it matches is sent after all
}

// ParseIgnore reads a .dockerignore file: one pattern a line; a line
// whose first character is "#" is a comment; blank space around a
// pattern (and after a leading "!") is dropped, and a blank line
// ignored. A pattern is cleaned as a path (so a leading "/" or "./", a
// trailing "/" and "a/../" go) and matched component by component with
// the syntax of path/filepath.Match, a component "**" matching any
// number of components (none included, but for a "**" at the end, which
// matches at least one). "!" makes a line an exception.
// A malformed pattern is an error naming its line.
func ParseIgnore(r io.Reader) (*Ignore, error) {
	ig := &Ignore{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), maxIgnoreLine)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(line)
		if text == "" {
			continue
		}
		p := pattern{}
		if rest, ok := strings.CutPrefix(text, "!"); ok {
			p.exception = true
			text = strings.TrimSpace(rest)
		}
		if text == "" {
			continue // a lone "!"
		}
		text = filepath.ToSlash(path.Clean(text))
		if len(text) > 1 {
			text = strings.TrimPrefix(text, "/")
		}
		p.text = text
		p.comps = strings.Split(text, "/")
		for _, c := range p.comps {
			if _, err := path.Match(c, ""); err != nil {
				return nil, fmt.Errorf(".dockerignore line %d: pattern %q: %w", n, line, err)
			}
		}
		ig.patterns = append(ig.patterns, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read .dockerignore: %w", err)
	}
	return ig, nil
}

// Excluded reports whether rel, a path below the context's root
// ('/'-separated, cleaned, "." for the root itself, which is never
// excluded), is left out. Each pattern is tried in order against rel and
// each of its parent directories; the last pattern that matches one of
// them decides: excluded, unless it is an exception. So "docs" excludes
// "docs/a/b" too, and a later "!docs/a/keep" sends that one file back.
func (ig *Ignore) Excluded(rel string) bool {
	if ig == nil || rel == "." || rel == "" {
		return false
	}
	comps := strings.Split(rel, "/")
	excluded := false
	for i := range ig.patterns {
		p := &ig.patterns[i]
		if p.exception != excluded {
			continue // it cannot change the outcome
		}
		for n := len(comps); n > 0; n-- {
			if matchComps(p.comps, comps[:n]) {
				excluded = !p.exception
				break
			}
		}
	}
	return excluded
}

// Reincludes reports whether an exception pattern could match something
// strictly inside the directory dir: if dir is excluded, a walk of the
// context must still look inside it (Docker does the same) and send what
// Excluded no longer excludes; if not, the walk skips dir whole. It
// errs on the side of true when a "**" makes it unsure.
func (ig *Ignore) Reincludes(dir string) bool {
	if ig == nil {
		return false
	}
	var comps []string
	if dir != "." && dir != "" {
		comps = strings.Split(dir, "/")
	}
	for i := range ig.patterns {
		if p := &ig.patterns[i]; p.exception && mayMatchBelow(p.comps, comps) {
			return true
		}
	}
	return false
}

// matchComps reports whether the pattern's components pat match the
// path's components name, "**" matching any number of them.
func matchComps(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			// Skip any number of components; "**" at the end takes
			// the rest, which must not be empty: "a/**" matches what
			// a holds, not a itself.
			if len(pat) == 1 {
				return len(name) > 0
			}
			for k := 0; k <= len(name); k++ {
				if matchComps(pat[1:], name[k:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// mayMatchBelow reports whether pat could match a path strictly below
// the directory dir (whose components are given).
func mayMatchBelow(pat, dir []string) bool {
	for i, d := range dir {
		if i == len(pat) {
			return false // pat matches at most dir's ancestors or dir
		}
		if pat[i] == "**" {
			return true
		}
		if ok, _ := path.Match(pat[i], d); !ok {
			return false
		}
	}
	return len(pat) > len(dir)
}
