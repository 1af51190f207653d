package api

import (
	"errors"
	"net/http"
)

// WriteParamError is the generated router's ErrorHandlerFunc: a path,
// query, header or cookie parameter that could not be bound becomes a 400
// naming the parameter.
func WriteParamError(w http.ResponseWriter, r *http.Request, err error) {
	WriteParamErrorOf(w, r, err, paramErrors)
}

// paramErrors reads this package's generated parameter errors.
var paramErrors = ParamErrorTypes{
	InvalidParamFormat:    ParamName(func(e *InvalidParamFormatError) string { return e.ParamName }),
	RequiredParam:         ParamName(func(e *RequiredParamError) string { return e.ParamName }),
	RequiredHeader:        ParamName(func(e *RequiredHeaderError) string { return e.ParamName }),
	TooManyValuesForParam: ParamName(func(e *TooManyValuesForParamError) string { return e.ParamName }),
	UnmarshalingParam:     ParamName(func(e *UnmarshalingParamError) string { return e.ParamName }),
	UnescapedCookieParam:  ParamName(func(e *UnescapedCookieParamError) string { return e.ParamName }),
}

// ParamErrorTypes reads the six parameter error types of one package that
// oapi-codegen generated a router into. The generator writes the types
// into every such package (this one, api/admin, an application's own) as
// types of that package, so only that package can name them: it fills in
// one [ParamName] per type, and [WriteParamErrorOf] does the rest. A nil
// field is a type that is not looked for.
type ParamErrorTypes struct {
	InvalidParamFormat    ParamNameFunc // *InvalidParamFormatError
	RequiredParam         ParamNameFunc // *RequiredParamError
	RequiredHeader        ParamNameFunc // *RequiredHeaderError
	TooManyValuesForParam ParamNameFunc // *TooManyValuesForParamError
	UnmarshalingParam     ParamNameFunc // *UnmarshalingParamError
	UnescapedCookieParam  ParamNameFunc // *UnescapedCookieParamError
}

// ParamNameFunc returns the name of the parameter that err, or an error it
// wraps, is about, and false when err holds no error of its type.
type ParamNameFunc func(err error) (param string, ok bool)

// ParamName is the [ParamNameFunc] of the generated error type E, whose
// parameter name name reads (its ParamName field).
func ParamName[E error](name func(E) string) ParamNameFunc {
	return func(err error) (string, bool) {
		e, ok := errors.AsType[E](err)
		if !ok {
			return "", false
		}
		return name(e), true
	}
}

// WriteParamErrorOf is [WriteParamError] for the generated package whose
// parameter error types types reads: a 400 problem naming the parameter
// and what is wrong with it, or a 400 without fields for an error of none
// of those types.
func WriteParamErrorOf(w http.ResponseWriter, r *http.Request, err error, types ParamErrorTypes) {
	e := &RequestError{Status: http.StatusBadRequest, Detail: "the request is invalid", Err: err}
	// The first type found wins, in this order: an error should hold only
	// one of them, but the order must not depend on the caller.
	for _, kind := range []struct {
		name    ParamNameFunc
		message string
	}{
		{types.InvalidParamFormat, "is not in the right format"},
		{types.RequiredParam, "is required"},
		{types.RequiredHeader, "is required"},
		{types.TooManyValuesForParam, "must be given once"},
		{types.UnmarshalingParam, "is not valid JSON"},
		{types.UnescapedCookieParam, "is not properly escaped"},
	} {
		if kind.name == nil {
			continue
		}
		if param, ok := kind.name(err); ok {
			e.Fields = []FieldError{{Field: param, Message: kind.message}}
			break
		}
	}
	WriteError(w, r, e)
}
