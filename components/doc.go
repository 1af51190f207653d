// Package components owns the component model: components registered under
// stable ids, their methods under stable names, typed method handles, the
// component client that invokes them, and deferred calls — a component id,
// a method name, an entity id where there is one and a JSON argument — that
// are stored (by timers) and dispatched by name later.
//
// Key-value entities (package entities) and timed actions (package
// timedactions) implement [Component] on one shared definition,
// [MethodSet]; endpoints, timed actions and entities call them through a
// [Client]. A component's business refusal is a [CommandError] with an
// [ErrorKind] (failure, invalid, not found, conflict), which api.WriteError
// answers with the kind's status.
//
//	reply, err := orders.PlaceOrder.Invoke(ctx, client, id, req) // now, and wait
//	call, err := orders.ExpireOrder.Deferred(id)                   // later, by a timer
package components
