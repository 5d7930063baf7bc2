package api

import _ "embed" // OpenAPI

// OpenAPI is the OpenAPI 3.1 document of cairnd's API, served at
// GET /v1/openapi.json. It is written by internal/openapi from the route
// descriptions there and the types of this package; tests there and in
// internal/server fail when it is out of date.
//
//go:generate go run ../internal/openapi/gen -o openapi.json
//go:embed openapi.json
var OpenAPI []byte
