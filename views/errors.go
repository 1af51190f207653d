package views

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/trellis-go/trellis/api"
)

// Errors a query's caller may test for with errors.Is. Each comes wrapped
// in an *api.RequestError (a 400 naming the parameter at fault), so an
// endpoint answers it with api.WriteError as it is.
var (
	// ErrBadToken: a page token that is not one this view made, or that
	// was made for another query or other parameters.
	ErrBadToken = errors.New("views: bad page token")
	// ErrBadParam: a parameter missing, unknown, or not of its field's
	// type.
	ErrBadParam = errors.New("views: bad query parameter")
	// ErrBadLimit: a limit below 1 or over the query's maximum.
	ErrBadLimit = errors.New("views: bad limit")
	// ErrUnknownQuery: no query by that name in the view.
	ErrUnknownQuery = errors.New("views: unknown query")
	// ErrBadPosition: a change position (to wait for) that is malformed.
	ErrBadPosition = errors.New("views: bad change position")
)

// ErrBehind is wrapped, together with context.DeadlineExceeded, when a
// query that waits for a change position gave up before the view applied
// it: api.WriteError answers 504.
var ErrBehind = errors.New("views: the view has not applied the change yet")

// ErrNotStarted is wrapped when a query runs on a runner where its view
// was not started.
var ErrNotStarted = errors.New("views: the view is not started")

// ErrNoChangeLog is wrapped by View.Start when the service's store keeps
// no change log (Redis with the cluster mode off).
var ErrNoChangeLog = errors.New("the store keeps no change log")

// ParamError is a query refused for one of its inputs.
type ParamError struct {
	// Param names the input: a parameter's field name, "limit", "token",
	// "min", "max", "query" or "after".
	Param  string
	Reason string
}

func (e *ParamError) Error() string { return e.Param + ": " + e.Reason }

// refuse is a 400 naming param, wrapping sentinel and why.
func refuse(sentinel error, param, format string, args ...any) error {
	reason := fmt.Sprintf(format, args...)
	return &api.RequestError{
		Status: http.StatusBadRequest,
		Detail: "the query is invalid",
		Fields: []api.FieldError{{Field: param, Message: reason}},
		Err:    fmt.Errorf("%w: %w", sentinel, &ParamError{Param: param, Reason: reason}),
	}
}
