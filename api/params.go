package api

import (
	"errors"
	"net/http"
)

// WriteParamError is the generated router's ErrorHandlerFunc: a path,
// query, header or cookie parameter that could not be bound becomes a 400
// naming the parameter.
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
		WriteError(w, r, &RequestError{Status: http.StatusBadRequest, Detail: "the request is invalid", Err: err})
		return
	}
	WriteError(w, r, &RequestError{
		Status: http.StatusBadRequest,
		Detail: "the request is invalid",
		Fields: []FieldError{{Field: field, Message: msg}},
		Err:    err,
	})
}
