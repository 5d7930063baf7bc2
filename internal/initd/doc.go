// Package initd is cairn-init, the agent that runs as PID 1 of every sandbox.
//
// It reaps every child, forwards the signals it gets to the process groups
// it started, and keeps one yamux connection to cairnd by dialing the host
// socket bound into the sandbox, again and again whenever the connection
// breaks. Each connection starts with a handshake in which it proves it
// holds Config.Key (package agentauth); cairnd may give it a new key
// (op rekey). cairnd opens a stream on that connection per request: ping,
// exec, attach, ack, sync, shutdown, services, logs or hostname. Processes
// outlive the connection, and so do attached exec sessions: their output
// is buffered until cairnd acknowledges it, and cairnd re-attaches a
// session after a broken connection, within a grace (see
// docs/exec-protocol.md). Background processes (exec with background) are
// kept by pid with the last 1 MiB of their output in a ring, their stdin
// open and, once exited, their status until read; the process ops list,
// attach to, write to, signal and wait for them.
//
// At start it also starts the services defined in /etc/cairn/services and
// restarts them per their policy until it stops, with their output in
// /var/log/cairn (see docs/services.md). Processes started through exec
// are never restarted.
//
// Behaviour only PID 1 may have (signalling every process with kill(-1, …))
// is enabled by Config.IsInit. Without it, initd marks its process a child
// subreaper so that orphaned descendants are still reparented to it and
// reaped, which is how the tests run it.
package initd
