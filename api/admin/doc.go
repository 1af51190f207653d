// Package admin is the generated server side of the admin routes of the
// framework's contract (../openapi.yaml, tag "admin": /admin/timers, …).
//
// `go generate ./api/...` turns the admin operations into admin.gen.go: the
// request and response types and [ServerInterface], which the service
// implements and mounts behind the admin token; a client of the admin API
// may use the types. The contract itself is api.Spec.
package admin
