// Package api holds the wire types shared by cairnd, the Go client, the CLI
// and the in-sandbox tools: request and response bodies, operation events and
// the one error shape with its stable codes. It has no behaviour of its own.
package api
