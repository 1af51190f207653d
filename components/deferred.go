package components

import (
	"encoding/json"
	"errors"
	"fmt"
)

// DeferredCall is a call to make later, by name: what a timer stores. Its
// JSON form is the stored form, so its field names are part of the
// contract.
type DeferredCall struct {
	ComponentID string          `json:"componentId"`
	Method      string          `json:"method"`
	EntityID    string          `json:"entityId,omitempty"`
	Argument    json.RawMessage `json:"argument"`
}

// Validate checks the call's form (not whether its target exists, which
// may change between deployments).
func (d DeferredCall) Validate() error { return d.validate(true) }

// validate is Validate, checking the argument's JSON only when checkArg:
// a call that json.Unmarshal just read has valid JSON in it already.
func (d DeferredCall) validate(checkArg bool) error {
	var errs []error
	if d.ComponentID == "" {
		errs = append(errs, errors.New("componentId is empty"))
	}
	if d.Method == "" {
		errs = append(errs, errors.New("method is empty"))
	}
	if checkArg && len(d.Argument) > 0 && !json.Valid(d.Argument) {
		errs = append(errs, fmt.Errorf("argument is not valid JSON: %w", ErrBadArgument))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("deferred call %s: %w", d, err)
	}
	return nil
}

// CheckNames is Validate without the argument's JSON: for a call read
// back from a store that validated it, whose argument the method's decoder
// reads in full anyway.
func (d DeferredCall) CheckNames() error { return d.validate(false) }

// String names the call as component.method[entity] for logs and errors.
func (d DeferredCall) String() string {
	if d.EntityID == "" {
		return d.ComponentID + "." + d.Method
	}
	return d.ComponentID + "." + d.Method + "[" + d.EntityID + "]"
}

// Marshal is the call's stored form.
func (d DeferredCall) Marshal() ([]byte, error) { return json.Marshal(d) }

// UnmarshalDeferredCall reads a call's stored form.
func UnmarshalDeferredCall(b []byte) (DeferredCall, error) {
	var d DeferredCall
	if err := json.Unmarshal(b, &d); err != nil {
		return DeferredCall{}, fmt.Errorf("decode deferred call: %w", err)
	}
	return d, d.validate(false)
}

// DecodeArgument decodes a JSON argument into A; a method's argument
// decoder. Unknown fields are allowed, so a call stored by an older
// deployment still decodes after a field was added; a wrong type, or JSON
// that is not one value, is an error wrapping ErrBadArgument.
func DecodeArgument[A any](b []byte) (A, error) {
	var a A
	if len(b) == 0 {
		b = []byte("null")
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return a, fmt.Errorf("%w: %w", ErrBadArgument, err)
	}
	return a, nil
}
