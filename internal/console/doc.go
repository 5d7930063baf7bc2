// Package console is cairnd's web console: the pages (HTML, CSS and
// JavaScript modules embedded in the binary), the login that turns an API
// token into a session cookie, the CSRF check that every change made with
// that cookie must pass, and the terminal's WebSocket bridge onto the exec
// protocol.
//
// The console holds no API of its own: its pages call the same /v1 routes
// as the CLI. A request that carries the session cookie instead of an
// Authorization header is given the session's token (Wrap), so it passes
// through the same authentication, role checks, rate limits and audit log
// as the token would: same account, same role, and a revoked or expired
// token ends the session at its next request. See docs/console.md.
package console
