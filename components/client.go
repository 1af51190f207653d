package components

import (
	"context"
	"encoding/json"
	"fmt"

	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-go/trellis/internal/tracing"
)

// Client invokes components: now (typed, through a method handle) or by
// name (a deferred call). It is safe for concurrent use; one per service.
// Each call is a span of its own when the client has a tracer.
type Client struct {
	reg    *Registry
	tracer trace.Tracer // nil: tracing is off
}

// ClientOption configures NewClient.
type ClientOption func(*Client)

// WithTracer makes each call through the client a span of t, and is how
// the components it calls find the service's tracer (Client.Tracer).
// Without it (or with nil) nothing is traced and nothing is spent on it.
func WithTracer(t trace.Tracer) ClientOption { return func(c *Client) { c.tracer = t } }

// NewClient makes a client over reg.
func NewClient(reg *Registry, opts ...ClientOption) *Client {
	c := &Client{reg: reg}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Registry is the client's registry.
func (c *Client) Registry() *Registry { return c.reg }

// Tracer is the service's tracer, which the platform's spans are made
// with; nil when tracing is off.
func (c *Client) Tracer() trace.Tracer { return c.tracer }

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
	ctx, span := tracing.StartCall(ctx, c.tracer, "call ", call.ComponentID, call.Method, call.EntityID, trace.SpanKindInternal)
	reply, err := c.dispatch(ctx, call)
	tracing.End(span, ErrorType(err))
	return reply, err
}

func (c *Client) dispatch(ctx context.Context, call DeferredCall) (json.RawMessage, error) {
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
	ctx, span := tracing.StartCall(ctx, c.tracer, "call ", componentID, method, entityID, trace.SpanKindInternal)
	r, err := invokeTyped[R](ctx, c, componentID, entityID, method, arg)
	tracing.End(span, ErrorType(err))
	return r, err
}

func invokeTyped[R any](ctx context.Context, c *Client, componentID, entityID, method string, arg any) (R, error) {
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
