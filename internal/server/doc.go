// Package server is cairnd's REST API: the routes (declared once, in
// routes.go), request decoding, and the one place where errors become an
// HTTP status and the JSON error shape (docs/errors.md). Long work answers
// 202 with an operation whose events stream as NDJSON; exec upgrades the
// connection and pipes the exec frames between client and cairn-init.
//
// The server holds no state of its own: it serves the small role
// interfaces of deps.go (Sandboxes, Checkpoints, Processes…), which cairnd
// fills with its sandbox manager, image catalog and operation registry,
// and the handler tests with a fake.
package server
