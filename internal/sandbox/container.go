package sandbox

import (
	"strconv"
	"strings"
	"time"
)

// A sandbox's runsc container is named after the sandbox: its id, a dot,
// and the time it was made, in nanoseconds, as 13 base-36 digits
// ("3f2a….0dn7u78k58rtc"). A restore in place replaces a running
// container: waiting for the old sandbox process to exit (the kernel
// freeing its memory: ~0.1 s per 512 MiB) before starting the new one would
// put that on the restore's critical path, so the old one is killed, the
// new one starts at once under its own name, and the old one is removed in
// the background (retireContainer). For a moment both hold memory. Recover
// maps container names back to sandboxes and keeps the newest running one
// of each.
//
// No name may be the beginning of another: runsc takes a container id as a
// prefix and refuses one that begins more than one name, even one that is a
// name in full. So the time has a fixed width, and a container of an
// earlier cairn named with the bare sandbox id is removed before another of
// its sandbox starts.

// genDigits is the width of a container name's generation: base-36
// nanoseconds since 1970 take 13 digits until the year 2140.
const genDigits = 13

// newContainerName is the name of a container about to start for sandbox
// id.
func newContainerName(id string) string {
	gen := strconv.FormatInt(time.Now().UnixNano(), 36)
	return id + "." + strings.Repeat("0", max(0, genDigits-len(gen))) + gen
}

// sandboxOfContainer returns the sandbox id a container name belongs to and
// the container's generation (0 for the plain id; later ones are larger).
func sandboxOfContainer(name string) (id string, gen int64) {
	id, suffix, ok := strings.Cut(name, ".")
	if !ok {
		return id, 0
	}
	gen, err := strconv.ParseInt(suffix, 36, 64)
	if err != nil || gen <= 0 {
		return name, 0 // not one of cairn's names: an orphan to sweep
	}
	return id, gen
}
