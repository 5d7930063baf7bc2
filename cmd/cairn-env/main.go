// Command cairn-env is the command-line client of the management socket
// inside a sandbox (/.cairn/api.sock): checkpoints created, listed and
// restored from inside. See `cairn-env help`.
package main

import (
	"os"

	"github.com/cairn-sandbox/cairn/internal/envcli"
)

func main() {
	os.Exit(envcli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
