// Package cartapi is the carts' HTTP contract and the code oapi-codegen
// generates from it: go generate ./...
package cartapi

import _ "embed"

//go:generate go tool oapi-codegen -generate types,chi-server -package cartapi -o cartapi.gen.go openapi.yaml

// Spec is the contract, served at GET /openapi.yaml.
//
//go:embed openapi.yaml
var Spec []byte
