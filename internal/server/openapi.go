package server

import (
	"net/http"

	"github.com/cairn-sandbox/cairn/api"
)

// openAPI answers the OpenAPI document of the API (api/openapi.json,
// written by internal/openapi; openapi_test.go holds it to routes).
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.Write(api.OpenAPI)
	return nil
}
