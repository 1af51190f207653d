package components

import (
	"context"
	"encoding/json"
	"fmt"
)

// Client invokes components: now (typed, through a method handle) or by
// name (a deferred call). It is safe for concurrent use; one per service.
type Client struct {
	reg *Registry
}

// NewClient makes a client over reg.
func NewClient(reg *Registry) *Client { return &Client{reg: reg} }

// Registry is the client's registry.
func (c *Client) Registry() *Registry { return c.reg }

// Dispatch runs a deferred call by name and returns the JSON reply. Its
// errors say why: ErrUnknownComponent, ErrUnknownMethod, ErrBadArgument,
// ErrMissingEntityID, a *CommandError, or ctx's error.
func (c *Client) Dispatch(ctx context.Context, call DeferredCall) (json.RawMessage, error) {
	// The argument's JSON is not scanned here: the method's decoder reads
	// all of it, and InvokeJSON's contract makes JSON that does not decode
	// an ErrBadArgument. Scanning it twice doubled the cost of a 1 KB
	// argument.
	if err := call.validate(false); err != nil {
		return nil, err
	}
	comp, err := c.reg.Lookup(call.ComponentID)
	if err != nil {
		return nil, fmt.Errorf("dispatch %s: %w", call, err)
	}
	reply, err := comp.InvokeJSON(ctx, call.EntityID, call.Method, call.Argument)
	if err != nil {
		return nil, fmt.Errorf("dispatch %s: %w", call, err)
	}
	return reply, nil
}

// invoke runs a method with a typed argument and types its reply.
func invoke[R any](ctx context.Context, c *Client, componentID, entityID, method string, arg any) (R, error) {
	var zero R
	comp, err := c.reg.Lookup(componentID)
	if err != nil {
		return zero, fmt.Errorf("invoke %s.%s: %w", componentID, method, err)
	}
	reply, err := comp.Invoke(ctx, entityID, method, arg)
	if err != nil {
		return zero, err
	}
	return decodeReply[R](reply, componentID, method)
}

// Result is the outcome of an asynchronous invocation.
type Result[R any] struct {
	Value R
	Err   error
}
