package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/trellis-go/trellis/components"
)

// Call is one forwarded component call: what components.DeferredCall
// names, plus the caller's deadline.
type Call struct {
	ComponentID string
	Method      string
	EntityID    string // empty for a component without entities
	Argument    json.RawMessage
	// Deadline is the caller's deadline as the server applied it to the
	// handler's context (zero: none). The client takes it from its ctx
	// and ignores this field.
	Deadline time.Time
	// Key is the caller's idempotency key (components.WithIdempotencyKey)
	// and CommandID the platform's command id (components.WithCommandID),
	// "" for none: the client takes them from its ctx (one of them: the
	// key when there is one), and the server puts them in the handler's
	// ctx, so that a forwarded command is applied once as it would be
	// here.
	Key, CommandID string
}

// String names the call as component.method[entity] for logs and errors;
// never the argument.
func (c Call) String() string {
	if c.EntityID == "" {
		return c.ComponentID + "." + c.Method
	}
	return c.ComponentID + "." + c.Method + "[" + c.EntityID + "]"
}

// Reply is a forwarded call's answer: the method's JSON reply.
type Reply struct {
	Value json.RawMessage
}

// Handler runs a forwarded call on the owner. Its ctx carries the
// caller's deadline and is canceled when the caller gives up or the
// connection breaks. To answer a kind other than KindInternal it returns
// an [*Error] (see [NewError]) or wraps a sentinel such as ErrMoved; a
// context error becomes KindDeadline or KindCanceled. The Argument is the
// handler's to keep.
type Handler func(ctx context.Context, c Call) (Reply, error)

// forwardPrefix starts a forward's path; the rest is the component id,
// the method and the entity id, each path-escaped:
// /peer/v1/forward/{component}/{method}/{entity}.
const forwardPrefix = "/peer/v1/forward/"

// headerTimeout carries the time the caller has left, as a Go duration
// ("1.5s"). A duration, not an instant: the peers' clocks need not agree
// for deadlines to hold.
const headerTimeout = "Trellis-Timeout"

// callContext is ctx for running call on the server: bounded by the
// caller's time left (a Go duration, as headerTimeout and a call line
// carry it; "" for none), which it records in call.Deadline. The caller
// calls cancel once the call is done; err is a timeout that does not
// parse.
func callContext(ctx context.Context, timeout string, call *Call) (_ context.Context, cancel context.CancelFunc, err error) {
	if timeout == "" {
		ctx, cancel = context.WithCancel(ctx)
		return ctx, cancel, nil
	}
	d, err := time.ParseDuration(timeout)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel = context.WithTimeout(ctx, d)
	call.Deadline, _ = ctx.Deadline()
	return ctx, cancel, nil
}

// errEmptyName: a call names its component and method.
var errEmptyName = errors.New("component id and method must not be empty")

// forwardPath is the call's request path, escaped, with its key or
// command id in the query (?k= or ?i=): signed with the path, on a call
// stream and on a request of its own alike.
func forwardPath(c Call) (string, error) {
	if c.ComponentID == "" || c.Method == "" {
		return "", errEmptyName
	}
	var b strings.Builder
	b.Grow(len(forwardPrefix) + len(c.ComponentID) + len(c.Method) + len(c.EntityID) + 2)
	b.WriteString(forwardPrefix)
	b.WriteString(url.PathEscape(c.ComponentID))
	b.WriteByte('/')
	b.WriteString(url.PathEscape(c.Method))
	b.WriteByte('/')
	b.WriteString(url.PathEscape(c.EntityID))
	switch {
	case c.Key != "":
		b.WriteString("?k=")
		b.WriteString(url.QueryEscape(c.Key))
	case c.CommandID != "":
		b.WriteString("?i=")
		b.WriteString(url.QueryEscape(c.CommandID))
	}
	return b.String(), nil
}

// keyed is c with the key and command id ctx carries.
func keyed(ctx context.Context, c Call) Call {
	c.Key, _ = components.IdempotencyKeyFrom(ctx)
	c.CommandID, _ = components.CommandIDFrom(ctx)
	return c
}

// withKeys is ctx carrying c's key and command id, for its handler.
func withKeys(ctx context.Context, c Call) context.Context {
	return components.WithCommandID(components.WithIdempotencyKey(ctx, c.Key), c.CommandID)
}

// parseForwardPath reads the names of a call from its request URI, as
// sent and signed (not as net/url re-read it).
func parseForwardPath(uri string) (Call, error) {
	uri, query, _ := strings.Cut(uri, "?")
	rest, ok := strings.CutPrefix(uri, forwardPrefix)
	comp, rest, ok1 := strings.Cut(rest, "/")
	method, entity, ok2 := strings.Cut(rest, "/")
	if !ok || !ok1 || !ok2 || comp == "" || method == "" {
		return Call{}, fmt.Errorf("path %q is not %s{component}/{method}/{entity}", uri, forwardPrefix)
	}
	var c Call
	var err error
	for _, f := range []struct {
		dst *string
		src string
	}{{&c.ComponentID, comp}, {&c.Method, method}, {&c.EntityID, entity}} {
		if *f.dst, err = url.PathUnescape(f.src); err != nil {
			return Call{}, fmt.Errorf("path %q: %w", uri, err)
		}
	}
	if query != "" {
		name, value, _ := strings.Cut(query, "=")
		v, err := url.QueryUnescape(value)
		switch {
		case err != nil:
			return Call{}, fmt.Errorf("query %q: %w", query, err)
		case name == "k":
			c.Key = v
		case name == "i":
			c.CommandID = v
		default:
			return Call{}, fmt.Errorf("query %q: want k= (an idempotency key) or i= (a command id)", query)
		}
	}
	return c, nil
}
