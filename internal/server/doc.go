// Package server is cairnd's REST API: the routes (declared once, in
// routes.go), request decoding, and the one place where errors become an
// HTTP status and the JSON error shape of DESIGN.md §4. Long work answers
// 202 with an operation whose events stream as NDJSON; exec upgrades the
// connection and pipes the exec frames between client and cairn-init.
package server
