package admin

import (
	"errors"
	"net/http"

	"github.com/trellis-go/trellis/api"
)

// WriteParamError is the generated admin router's ErrorHandlerFunc: a
// path or query parameter that could not be bound (limit=abc,
// failing=maybe) becomes a 400 problem naming the parameter. It is
// api.WriteParamError for this package's copies of the generated error
// types, which are distinct types from package api's.
func WriteParamError(w http.ResponseWriter, r *http.Request, err error) {
	var (
		format   *InvalidParamFormatError
		required *RequiredParamError
		header   *RequiredHeaderError
		many     *TooManyValuesForParamError
		unmarsh  *UnmarshalingParamError
		cookie   *UnescapedCookieParamError
	)
	var field, msg string
	switch {
	case errors.As(err, &format):
		field, msg = format.ParamName, "is not in the right format"
	case errors.As(err, &required):
		field, msg = required.ParamName, "is required"
	case errors.As(err, &header):
		field, msg = header.ParamName, "is required"
	case errors.As(err, &many):
		field, msg = many.ParamName, "must be given once"
	case errors.As(err, &unmarsh):
		field, msg = unmarsh.ParamName, "is not valid JSON"
	case errors.As(err, &cookie):
		field, msg = cookie.ParamName, "is not properly escaped"
	default:
		api.WriteError(w, r, &api.RequestError{Status: http.StatusBadRequest, Detail: "the request is invalid", Err: err})
		return
	}
	api.WriteError(w, r, &api.RequestError{
		Status: http.StatusBadRequest,
		Detail: "the request is invalid",
		Fields: []api.FieldError{{Field: field, Message: msg}},
		Err:    err,
	})
}
