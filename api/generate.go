package api

import _ "embed"

//go:generate go tool oapi-codegen -config oapi-codegen.yaml openapi.yaml

// Spec is the OpenAPI document the server's types and routes are generated
// from, as the service serves it at GET /openapi.yaml.
//
//go:embed openapi.yaml
var Spec []byte
