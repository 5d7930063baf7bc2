package daemon

import (
	"context"
	"net/http"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/auth"
	"github.com/cairn-sandbox/cairn/internal/errdefs"

	"github.com/cairn-sandbox/cairn/internal/catalog"
	"github.com/cairn-sandbox/cairn/internal/console"
	"github.com/cairn-sandbox/cairn/internal/hosts"
	"github.com/cairn-sandbox/cairn/internal/metrics"
	"github.com/cairn-sandbox/cairn/internal/offsite"
	"github.com/cairn-sandbox/cairn/internal/sandbox"
	"github.com/cairn-sandbox/cairn/internal/server"
)

// Who observes for the metrics, and what they read at a scrape.
var (
	_ sandbox.Observer       = (*metrics.Metrics)(nil)
	_ offsite.Observer       = (*metrics.Metrics)(nil)
	_ server.RequestObserver = (*metrics.Metrics)(nil)
	_ metrics.States         = (*catalog.Catalog)(nil)
	_ metrics.Lags           = (*offsite.Service)(nil)
)

// offsiteLags reads the off-site lag of every account's service.
func offsiteLags(set *offsite.Set) func() []metrics.Lags {
	return func() []metrics.Lags {
		var out []metrics.Lags
		for _, svc := range set.Services() {
			out = append(out, svc)
		}
		return out
	}
}

// MetricsPath is where the unix socket serves cairnd's metrics.
const MetricsPath = "/metrics"

// socketHandler is what the unix socket (the administrator's channel)
// serves: the API, and GET /metrics in the Prometheus text format.
func socketHandler(api, metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+MetricsPath, metrics)
	mux.Handle("/", api)
	return mux
}

// remoteHandler serves the API to tokens (and to the web console's
// sessions) on the TCP listener, MetricsPath to admin tokens alone, and
// the console's pages at / and /console/.
//
// With several hosts, a console session lives on the host that opened it;
// a request with its cookie that reaches another host is forwarded there
// (console.SetHosts).
func remoteHandler(srv *server.Server, authn server.Authenticator, metrics http.Handler, self string, fwd *hosts.Forwarder) http.Handler {
	con := console.New(authn, time.Now)
	if fwd != nil {
		con.SetHosts(self, func(w http.ResponseWriter, r *http.Request, host string, fail func(error)) {
			fwd.Forward(w, r, host, api.CallerToken, fail)
		})
	}
	apiHandler := con.Wrap(srv.RemoteHandler(authn, nil))
	pages := con.Handler(apiHandler)
	mux := http.NewServeMux()
	mux.Handle("GET "+MetricsPath, srv.RemoteHandler(adminGate{authn}, metrics))
	mux.Handle("/v1", apiHandler)
	mux.Handle("/v1/", apiHandler)
	mux.Handle("GET /{$}", pages)
	mux.Handle("/console/", pages)
	mux.Handle("/", srv.RemoteHandler(authn, nil))
	return mux
}

// adminGate lets only admin tokens through.
type adminGate struct{ server.Authenticator }

func (g adminGate) Authenticate(ctx context.Context, token, remote string) (auth.Credential, error) {
	c, err := g.Authenticator.Authenticate(ctx, token, remote)
	if err == nil && c.Role != auth.RoleAdmin {
		return auth.Credential{}, errdefs.New(api.CodeForbidden, "%s needs an admin token", MetricsPath)
	}
	return c, err
}
