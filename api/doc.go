// Package api owns the HTTP contract and the helpers every endpoint uses.
//
// openapi.yaml is the contract. `go generate ./api` turns it into
// api.gen.go with oapi-codegen (pinned as a Go tool in go.mod): the
// request and response types and [ServerInterface], the chi server
// interface that the application implements. The service's own routes
// are in the contract too but not in [ServerInterface]: health,
// readiness, metrics and the contract itself (tag "system") are served by
// package trellis by hand, and the admin routes (tag "admin") are
// generated into package api/admin and implemented by package trellis.
// [Spec] is the contract as the service serves it.
//
// Endpoints are written against the hand-written helpers:
//
//	func (e *Endpoint) IncreaseCounter(w http.ResponseWriter, r *http.Request, id api.CounterID) {
//		var body api.CounterIncrease
//		if err := api.Decode(r, &body); err != nil {
//			api.WriteError(w, r, err) // 400/413/415 naming the field
//			return
//		}
//		c, err := Increase.Invoke(r.Context(), e.client, id, body.By)
//		if err != nil {
//			api.WriteError(w, r, err) // error(message) → 400, timeout → 504, else 500
//			return
//		}
//		api.WriteJSON(w, r, http.StatusOK, api.Counter{Id: c.ID, Value: c.Value})
//	}
//
// Every error response is an RFC 9457 problem ([Problem], served as
// application/problem+json): see [WriteProblem] and [WriteError].
package api
