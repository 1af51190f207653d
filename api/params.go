package api

import (
	"net/http"
	"reflect"
)

// WriteParamError is the ErrorHandlerFunc of any router that oapi-codegen
// generated (its ChiServerOptions): a path, query, header or cookie
// parameter that could not be bound becomes a 400 problem naming the
// parameter and what is wrong with it; any other error is a 400 without
// fields.
//
//	contract.HandlerWithOptions(endpoints, contract.ChiServerOptions{
//		BaseRouter:       r,
//		ErrorHandlerFunc: api.WriteParamError,
//	})
//
// oapi-codegen writes its six parameter error types into every package it
// generates a router into, as types of that package, so no package can
// name them all: they are recognised by their type name and their
// ParamName field, in the error or any error it wraps.
func WriteParamError(w http.ResponseWriter, r *http.Request, err error) {
	e := &RequestError{Status: http.StatusBadRequest, Detail: "the request is invalid", Err: err}
	if param, message, ok := paramError(err); ok {
		e.Fields = []FieldError{{Field: param, Message: message}}
	}
	WriteError(w, r, e)
}

// paramMessages says, for each of oapi-codegen's parameter error types,
// what is wrong with the parameter.
var paramMessages = map[string]string{
	"InvalidParamFormatError":    "is not in the right format",
	"RequiredParamError":         "is required",
	"RequiredHeaderError":        "is required",
	"TooManyValuesForParamError": "must be given once",
	"UnmarshalingParamError":     "is not valid JSON",
	"UnescapedCookieParamError":  "is not properly escaped",
}

// paramError finds the first generated parameter error in err's tree,
// depth first as errors.As walks it, and returns its parameter and what
// is wrong with it.
func paramError(err error) (param, message string, ok bool) {
	if err == nil {
		return "", "", false
	}
	if param, message, ok := asParamError(err); ok {
		return param, message, true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return paramError(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if param, message, ok := paramError(e); ok {
				return param, message, true
			}
		}
	}
	return "", "", false
}

// asParamError reads err itself (not what it wraps) as a generated
// parameter error: a pointer to a struct of one of paramMessages' type
// names with a string field ParamName.
func asParamError(err error) (param, message string, ok bool) {
	v := reflect.ValueOf(err)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return "", "", false
	}
	message, ok = paramMessages[v.Elem().Type().Name()]
	if !ok {
		return "", "", false
	}
	f := v.Elem().FieldByName("ParamName")
	if !f.IsValid() || f.Kind() != reflect.String {
		return "", "", false
	}
	return f.String(), message, true
}
