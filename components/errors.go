package components

import (
	"errors"
	"fmt"
)

// ErrorKind is what sort of business refusal a [CommandError] is, so that
// an endpoint can answer it with the right status without reading its
// message (api.WriteError maps each kind to one). A timer retries a call
// that fails with any kind: to a timer, a refusal is a failure.
type ErrorKind uint8

// The kinds of refusal.
const (
	// Failure is a plain refusal: the command cannot be carried out
	// (HTTP 400). It is what error(message) effects make.
	Failure ErrorKind = iota
	// Invalid: the argument breaks a business rule, though it is well
	// formed (HTTP 422).
	Invalid
	// NotFound: what the command is about does not exist (HTTP 404).
	NotFound
	// Conflict: the command clashes with the current state, such as
	// creating what exists already (HTTP 409).
	Conflict
)

// String names the kind.
func (k ErrorKind) String() string {
	switch k {
	case Failure:
		return "failure"
	case Invalid:
		return "invalid"
	case NotFound:
		return "not found"
	case Conflict:
		return "conflict"
	}
	return fmt.Sprintf("ErrorKind(%d)", uint8(k))
}

// CommandError is a component's own refusal: the error effect of an entity
// command or a timed action, with its kind and a message for the caller.
type CommandError struct {
	Kind    ErrorKind
	Message string
}

func (e *CommandError) Error() string { return e.Message }

// Errorf makes a CommandError of kind Failure.
func Errorf(format string, args ...any) error {
	return NewError(Failure, format, args...)
}

// NewError makes a CommandError of kind kind.
func NewError(kind ErrorKind, format string, args ...any) error {
	return &CommandError{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// IsCommandError reports whether err is (or wraps) a CommandError and
// returns its message.
func IsCommandError(err error) (string, bool) {
	var ce *CommandError
	if errors.As(err, &ce) {
		return ce.Message, true
	}
	return "", false
}
