// Command cairn is the command line of cairn: it creates, runs and
// inspects sandboxes through cairnd. See package cli.
package main

import (
	"os"

	"github.com/cairn-sandbox/cairn/internal/cli"
)

func main() {
	os.Exit(cli.Execute(os.Args[1:]))
}
