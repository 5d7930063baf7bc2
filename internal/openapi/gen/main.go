// Command gen writes the OpenAPI document of cairnd's API (package
// openapi): `go generate ./api` runs it in api/.
package main

import (
	"flag"
	"log"
	"os"

	"github.com/cairn-sandbox/cairn/internal/openapi"
)

func main() {
	apiDir := flag.String("api", ".", "the directory of package api's source")
	out := flag.String("o", "openapi.json", "where to write the document")
	flag.Parse()
	doc, err := openapi.Build(*apiDir)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, doc, 0o644); err != nil {
		log.Fatal(err)
	}
}
