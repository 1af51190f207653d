// Package api owns the helpers every endpoint is written with, and the
// framework's own contract.
//
// An endpoint decodes and validates its JSON body with [Decode], answers
// with [WriteJSON], and answers every error with [WriteError], which turns
// it into an RFC 9457 problem ([Problem], served as
// application/problem+json) with the right status: a request error names
// the invalid fields; a component's business refusal gets the status of
// its kind ([KindStatus]: not found 404, conflict 409, invalid 422, plain
// failure 400); a timeout 504; anything else a 500 whose details go only
// to the log, under the request's correlation id.
//
//	func (e *Endpoint) AddItem(w http.ResponseWriter, r *http.Request, id contract.CartID) {
//		var body contract.Item
//		if err := api.Decode(r, &body); err != nil {
//			api.WriteError(w, r, err) // 400/413/415 naming the field
//			return
//		}
//		c, err := carts.AddItem.Invoke(r.Context(), e.client, id, body.Sku)
//		if err != nil {
//			api.WriteError(w, r, err) // ctx.NotFound → 404, ctx.Conflict → 409, …
//			return
//		}
//		api.WriteJSON(w, r, http.StatusOK, toJSON(c))
//	}
//
// [WriteParamError] is the ErrorHandlerFunc of any router oapi-codegen
// generated: a path or query parameter that cannot be bound is a 400
// problem naming it.
//
// [Spec] is the framework's contract (openapi.yaml): the routes every
// service serves itself (health, readiness, metrics, the admin API),
// served at GET /admin/openapi.yaml; package api/admin is generated from
// its admin operations.
package api
