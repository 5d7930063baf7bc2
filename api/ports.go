package api

import "time"

// Port is a published TCP port of a sandbox, as GET and POST
// /v1/sandboxes/{name}/ports answer it. See docs/ports.md.
type Port struct {
	Port   int  `json:"port"`   // inside the sandbox
	Public bool `json:"public"` // reachable without the account's port token
	// URL reaches the port through cairnd's port proxy by host name
	// (http://PORT-NAME.DOMAIN:PROXYPORT/); PathURL by path
	// (http://DOMAIN:PROXYPORT/sandboxes/NAME/ports/PORT/), for setups
	// without wildcard DNS.
	URL       string    `json:"url"`
	PathURL   string    `json:"path_url"`
	CreatedAt time.Time `json:"created_at"`
}

// PublishPortRequest is the body of POST /v1/sandboxes/{name}/ports.
// Publishing a port that is published already sets whether it is public.
type PublishPortRequest struct {
	Port   int  `json:"port"`
	Public bool `json:"public,omitempty"`
}

// PortToken answers GET /v1/account/port-token and POST
// /v1/account/port-token/rotate: the secret that opens the account's
// private ports.
type PortToken struct {
	Token string `json:"token"`
}

// How a request to a private port carries the account's port token: the
// header "Authorization: Bearer TOKEN", the cookie PortTokenCookie, or,
// from a browser, the query parameter PortTokenQuery once (the proxy then
// sets the cookie and redirects to the URL without it).
const (
	PortTokenCookie = "cairn_port_token"
	PortTokenQuery  = "cairn_token"
)

// ConnectUpgrade is the protocol of POST
// /v1/sandboxes/{name}/ports/{port}/connect: after cairnd answers 101, the
// connection carries the bytes of one TCP connection to the port, both
// ways.
const ConnectUpgrade = "cairn-tcp"

// Port numbers a sandbox can publish or be connected to.
const (
	MinPort = 1
	MaxPort = 65535
)
