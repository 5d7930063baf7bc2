package server

import "net/http"

// route is one endpoint of the API.
type route struct {
	method  string
	path    string // net/http pattern path, with {wildcards}
	handler func(s *Server, w http.ResponseWriter, r *http.Request) error
}

// routes is every endpoint of the API, in one place. See docs/api.md.
var routes = []route{
	{"GET", "/v1", (*Server).getInfo},
	{"GET", "/v1/openapi.json", (*Server).openAPI},
	{"GET", "/v1/images", (*Server).listImages},
	{"POST", "/v1/images/pull", (*Server).pullImage},
	{"POST", "/v1/images/import", (*Server).importImage},
	{"POST", "/v1/images/build", (*Server).buildImage},
	{"POST", "/v1/images/prune", (*Server).pruneImages},
	{"GET", "/v1/images/{name}", (*Server).getImage},
	{"DELETE", "/v1/images/{name}", (*Server).deleteImage},
	{"GET", "/v1/sandboxes", (*Server).listSandboxes},
	{"POST", "/v1/sandboxes", (*Server).createSandbox},
	{"GET", "/v1/sandboxes/{name}", (*Server).getSandbox},
	{"DELETE", "/v1/sandboxes/{name}", (*Server).deleteSandbox},
	{"PATCH", "/v1/sandboxes/{name}", (*Server).configureSandbox},
	{"POST", "/v1/sandboxes/{name}/start", (*Server).startSandbox},
	{"POST", "/v1/sandboxes/{name}/stop", (*Server).stopSandbox},
	{"POST", "/v1/sandboxes/{name}/restart", (*Server).restartSandbox},
	{"POST", "/v1/sandboxes/{name}/exec", (*Server).execSandbox},
	{"GET", "/v1/sandboxes/{name}/events", (*Server).sandboxEvents},
	{"GET", "/v1/sandboxes/{name}/services", (*Server).listServices},
	{"GET", "/v1/sandboxes/{name}/services/{service}/logs", (*Server).serviceLogs},
	{"POST", "/v1/sandboxes/{name}/checkpoint", (*Server).createCheckpoint},
	{"GET", "/v1/sandboxes/{name}/checkpoints", (*Server).listCheckpoints},
	{"GET", "/v1/sandboxes/{name}/checkpoints/{id}", (*Server).getCheckpoint},
	{"DELETE", "/v1/sandboxes/{name}/checkpoints/{id}", (*Server).deleteCheckpoint},
	{"POST", "/v1/sandboxes/{name}/checkpoints/{id}/restore", (*Server).restoreCheckpoint},
	{"POST", "/v1/sandboxes/{name}/checkpoints/{id}/keep", (*Server).keepCheckpoint},
	{"POST", "/v1/sandboxes/{name}/checkpoints/{id}/evict", (*Server).evictCheckpoint},
	{"POST", "/v1/sandboxes/{name}/fork", (*Server).forkSandbox},
	{"GET", "/v1/sandboxes/{name}/diff", (*Server).diffSandbox},
	{"GET", "/v1/sandboxes/{name}/ports", (*Server).listPorts},
	{"POST", "/v1/sandboxes/{name}/ports", (*Server).publishPort},
	{"DELETE", "/v1/sandboxes/{name}/ports/{port}", (*Server).unpublishPort},
	{"POST", "/v1/sandboxes/{name}/ports/{port}/connect", (*Server).connectPort},
	{"GET", "/v1/snapshots", (*Server).listSnapshots},
	{"POST", "/v1/sandboxes/{name}/snapshot", (*Server).createSnapshot},
	{"DELETE", "/v1/snapshots/{ref}", (*Server).deleteSnapshot},
	{"POST", "/v1/snapshots/{ref}/restore", (*Server).restoreSnapshot},
	{"GET", "/v1/account", (*Server).getAccount},
	{"GET", "/v1/account/port-token", (*Server).getPortToken},
	{"POST", "/v1/account/port-token/rotate", (*Server).rotatePortToken},
	{"GET", "/v1/whoami", (*Server).whoami},
	{"GET", "/v1/audit", (*Server).listAudit},
	{"GET", "/v1/accounts", (*Server).listAccounts},
	{"POST", "/v1/accounts", (*Server).createAccount},
	{"PATCH", "/v1/accounts/{name}", (*Server).setAccount},
	{"DELETE", "/v1/accounts/{name}", (*Server).deleteAccount},
	{"GET", "/v1/tokens", (*Server).listTokens},
	{"POST", "/v1/tokens", (*Server).createToken},
	{"DELETE", "/v1/tokens/{id}", (*Server).revokeToken},
	{"POST", "/v1/verify", (*Server).verify},
	{"GET", "/v1/offsite/checkpoints", (*Server).offsiteCheckpoints},
	{"POST", "/v1/offsite/import", (*Server).importOffsite},
	{"GET", "/v1/operations", (*Server).listOperations},
	{"GET", "/v1/operations/{id}", (*Server).getOperation},
	{"GET", "/v1/operations/{id}/events", (*Server).operationEvents},
}
