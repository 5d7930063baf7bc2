// Package agent is cairnd's side of the connection to cairn-init, the agent
// inside each sandbox.
//
// cairnd listens on one unix socket per sandbox (bound into the sandbox)
// and cairn-init dials it, again whenever its connection breaks, so a Host
// holds whichever connection came last. Each request is one yamux stream
// cairnd opens on it. The stream of an attached exec outlives a broken
// connection: it re-attaches its session on the next one. The protocol is
// in docs/exec-protocol.md.
package agent
