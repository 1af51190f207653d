// Package admin is the generated server side of the admin routes of the
// contract (../openapi.yaml, tag "admin": /admin/timers, …).
//
// `go generate ./api/...` turns the admin operations into admin.gen.go: the
// request and response types and [ServerInterface]. Package trellis
// implements it and mounts it behind the admin token; applications do not
// see it, since package api is generated without the admin tag. The
// contract itself is api.Spec.
//
// [WriteParamError] is the generated router's error handler: a query or
// path parameter that cannot be bound becomes a 400 problem naming it,
// like api.WriteParamError does for the application's routes.
package admin
