// Package agent is cairnd's side of the connection to cairn-init, the agent
// inside each sandbox.
//
// cairnd listens on one unix socket per sandbox (bound into the sandbox)
// and cairn-init dials it, again whenever its connection breaks. A Host
// takes a connection only once it proved it holds the sandbox's key (see
// package agentauth), and only one at a time; it keeps that key in a key
// file and gives a cairn-init resumed from a memory image a key of its own
// (a re-key). Each request is one yamux stream
// cairnd opens on it. The stream of an attached exec outlives a broken
// connection: it re-attaches its session on the next one. The protocol is
// in docs/exec-protocol.md.
package agent
