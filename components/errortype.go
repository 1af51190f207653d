package components

import (
	"context"
	"errors"
)

// ErrorType names the kind of a call's failure in a few words, for a
// span's status and a log line: "command: not found" for a component's
// refusal, "unknown component", "unavailable", "deadline" and so on; ""
// for nil. It never holds the error's message, which may quote an
// argument.
func ErrorType(err error) string {
	if err == nil {
		return ""
	}
	var ce *CommandError
	switch {
	case errors.As(err, &ce):
		return "command: " + ce.Kind.String()
	case errors.Is(err, ErrUnknownComponent):
		return "unknown component"
	case errors.Is(err, ErrUnknownMethod):
		return "unknown method"
	case errors.Is(err, ErrBadArgument):
		return "bad argument"
	case errors.Is(err, ErrMissingEntityID):
		return "entity id required"
	case errors.Is(err, ErrOutcomeUnknown):
		return "outcome unknown"
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	case errors.Is(err, ErrConflict):
		return "conflict"
	case errors.Is(err, ErrLimit):
		return "limit"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "internal"
}
