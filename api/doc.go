// Package api will own the HTTP contract: api/openapi.yaml and the code that
// oapi-codegen generates from it. For now it holds only the contract, which
// describes GET /healthz; no code is generated yet.
package api
