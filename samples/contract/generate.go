// Package contract is the samples' HTTP contract (openapi.yaml) and the
// code oapi-codegen generates from it (contract.gen.go): the request and
// response types of the counter and order samples and [ServerInterface],
// the chi server interface that their endpoints implement together.
// cmd/server mounts it on the service's router and serves [Spec] at GET
// /openapi.yaml, as any application does with its own contract.
package contract

import _ "embed"

//go:generate go tool oapi-codegen -config oapi-codegen.yaml openapi.yaml

// Spec is the samples' contract, as cmd/server serves it.
//
//go:embed openapi.yaml
var Spec []byte
