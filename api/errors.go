package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/trellis-go/trellis/components"
)

// StoreUnavailableDetail is the detail of the 503 that answers a request
// the state store could not serve.
const StoreUnavailableDetail = "the state store is not available; retry later"

// OwnerUnreachableDetail is the detail of the 503 that answers a request
// whose entity's owner, another instance of the cluster, could not be
// reached.
const OwnerUnreachableDetail = "the instance that owns the entity could not be reached, and nothing was changed; retry later"

// ShardMovingDetail is the detail of the 503 that answers a request whose
// entity's shard moved between instances each time it was routed.
const ShardMovingDetail = "the entity is moving between instances of the cluster, and nothing was changed; retry later"

// ProblemTypeOutcomeUnknown is the problem type of a 504 whose request
// may or may not have taken effect: a write reached the state store and
// its answer was lost. It differs from a 503, which promises that nothing
// was changed.
const ProblemTypeOutcomeUnknown = "urn:trellis:problem:outcome-unknown"

// OutcomeUnknownDetail is the detail of that 504.
const OutcomeUnknownDetail = "the outcome is unknown: the state store may have applied the change, but its answer was lost; " +
	"retrying with the same Idempotency-Key is safe (the first outcome is then found or the request runs once)"

// RequestError is a request refused before it ran: the client's mistake,
// answered with a 4xx problem that names the invalid fields. [Decode]
// returns them; endpoints make their own with [InvalidField].
type RequestError struct {
	// Status is the HTTP status: 400, 408, 413 or 415.
	Status int
	// Detail says what is wrong, for a person to read.
	Detail string
	// Fields are the invalid fields, if the problem is with fields.
	Fields []FieldError
	// Err is the underlying error, if any (for logs and errors.Is).
	Err error
}

func (e *RequestError) Error() string {
	var b strings.Builder
	b.WriteString(e.Detail)
	for i, f := range e.Fields {
		if i == MaxListedErrors {
			fmt.Fprintf(&b, "; %d more", len(e.Fields)-i)
			break
		}
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(f.Field + " " + f.Message)
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *RequestError) Unwrap() error { return e.Err }

// HTTPStatus is the response status.
func (e *RequestError) HTTPStatus() int { return e.Status }

// InvalidField is a 400 error naming one invalid field (a body field's JSON
// path, or a path or query parameter's name) with what is wrong with it.
func InvalidField(field, message string) error {
	return &RequestError{
		Status: http.StatusBadRequest,
		Detail: "the request is invalid",
		Fields: []FieldError{{Field: field, Message: message}},
	}
}

// WriteError answers with the problem err stands for:
//
//   - a *RequestError (from Decode or InvalidField): its status, detail
//     and invalid fields;
//   - a *components.CommandError, a component's business refusal: the
//     status of its kind (see [KindStatus]) with the message as the
//     detail;
//   - components.ErrConflict (entities.ErrConflict), a command that met a
//     write conflict too many times in a row: 409 with a Retry-After, to
//     be retried;
//   - an error with an HTTPStatus() int method: that status, with
//     err.Error() as the detail for a 4xx;
//   - components.ErrOutcomeUnknown, a write sent to the state store whose
//     answer was lost: 504 of type [ProblemTypeOutcomeUnknown], saying
//     that the change may have been applied and that a retry with the
//     same Idempotency-Key is safe (never a 503, which promises that
//     nothing was changed);
//   - context.DeadlineExceeded (the request timeout): 504;
//   - context.Canceled (the client went away, or the server is stopping):
//     503;
//   - components.ErrLimit (a *timers.LimitError): a limit on what the
//     store holds, which also wraps components.ErrUnavailable (the active
//     timers), is 503 (timers fire and make room again), a limit on the
//     call (a timer's name, its payload) 400; the detail is the message
//     of the error that wraps ErrLimit, which names the limit;
//   - components.ErrOwnerUnreachable (in a cluster, the instance that
//     owns the entity could not be reached, and nothing was changed):
//     503 naming that cause;
//   - components.ErrShardMoving (in a cluster, the entity's shard moved
//     each time the call was routed, and nothing was changed): 503
//     naming that cause;
//   - components.ErrUnavailable, the state store unavailable (unreachable,
//     or answering that it cannot serve now), from an entity, a timer or
//     the component client: 503 "the state store is not available", its
//     cause in the log;
//   - anything else: 500 "Unexpected error". Its body carries only the
//     request id as a correlation id; err itself goes to the log (the
//     logger in the request's context) under the same id, since its text may
//     reveal internals.
//
// Wrapped errors are unwrapped: the first rule that matches wins.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	var (
		reqErr     *RequestError
		cmdErr     *components.CommandError
		withStatus interface{ HTTPStatus() int }
	)
	switch {
	case err == nil:
		err = errors.New("api.WriteError called with a nil error")
	case errors.As(err, &reqErr):
		WriteProblem(w, r, reqErr.Status, reqErr.Detail, reqErr.Fields...)
		return
	case errors.As(err, &cmdErr):
		WriteProblem(w, r, KindStatus(cmdErr.Kind), cmdErr.Message)
		return
	case errors.Is(err, components.ErrConflict):
		logAt(r, slog.LevelWarn, "write conflicts", err)
		w.Header().Set("Retry-After", "1") // says "retry", unlike a business refusal's 409
		WriteProblem(w, r, http.StatusConflict, "the entity was changed concurrently too many times; retry the request")
		return
	case errors.As(err, &withStatus) && withStatus.HTTPStatus() >= 400 && withStatus.HTTPStatus() < 500:
		WriteProblem(w, r, withStatus.HTTPStatus(), err.Error())
		return
	case errors.Is(err, components.ErrOutcomeUnknown):
		logAt(r, slog.LevelWarn, "state store outcome unknown", err)
		WriteProblemBody(w, r, Problem{Status: http.StatusGatewayTimeout, Type: ProblemTypeOutcomeUnknown,
			Title: "Outcome unknown", Detail: OutcomeUnknownDetail})
		return
	case errors.Is(err, context.DeadlineExceeded):
		logAt(r, slog.LevelWarn, "request timed out", err)
		WriteProblem(w, r, http.StatusGatewayTimeout, "the request did not finish in time")
		return
	case errors.Is(err, context.Canceled):
		logAt(r, slog.LevelInfo, "request cancelled", err)
		WriteProblem(w, r, http.StatusServiceUnavailable, "the request was cancelled")
		return
	case errors.Is(err, components.ErrLimit):
		status := http.StatusBadRequest
		if errors.Is(err, components.ErrUnavailable) {
			status = http.StatusServiceUnavailable
		}
		logAt(r, slog.LevelWarn, "limit exceeded", err)
		WriteProblem(w, r, status, limitRefusal(err).Error())
		return
	case errors.Is(err, components.ErrOwnerUnreachable):
		logAt(r, slog.LevelWarn, "entity owner unreachable", err)
		WriteProblem(w, r, http.StatusServiceUnavailable, OwnerUnreachableDetail)
		return
	case errors.Is(err, components.ErrShardMoving):
		logAt(r, slog.LevelWarn, "entity's shard kept moving", err)
		WriteProblem(w, r, http.StatusServiceUnavailable, ShardMovingDetail)
		return
	case errors.Is(err, components.ErrUnavailable):
		logAt(r, slog.LevelWarn, "state store unavailable", err)
		WriteProblem(w, r, http.StatusServiceUnavailable, StoreUnavailableDetail)
		return
	}
	status := http.StatusInternalServerError
	if errors.As(err, &withStatus) && withStatus.HTTPStatus() >= 500 && withStatus.HTTPStatus() < 600 {
		status = withStatus.HTTPStatus()
	}
	logAt(r, slog.LevelError, "unexpected error", err)
	WriteProblem(w, r, status, "Unexpected error")
}

// KindStatus is the HTTP status of a business refusal of kind k:
// Failure 400, Invalid 422, NotFound 404, Conflict 409 (and 400 for a
// kind this version does not know).
func KindStatus(k components.ErrorKind) int {
	switch k {
	case components.Invalid:
		return http.StatusUnprocessableEntity
	case components.NotFound:
		return http.StatusNotFound
	case components.Conflict:
		return http.StatusConflict
	}
	return http.StatusBadRequest
}

// logAt logs err for request r with its request id, method and path.
func logAt(r *http.Request, level slog.Level, msg string, err error) {
	ctx := r.Context()
	Logger(ctx).LogAttrs(ctx, level, msg,
		slog.String("requestId", RequestID(ctx)),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.String("err", fmt.Sprint(err)),
	)
}
