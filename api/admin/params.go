package admin

import (
	"net/http"

	"github.com/trellis-go/trellis/api"
)

// WriteParamError is the generated admin router's ErrorHandlerFunc: a
// path or query parameter that could not be bound (limit=abc,
// failing=maybe) becomes a 400 problem naming the parameter, as
// api.WriteParamError does for the application's routes.
func WriteParamError(w http.ResponseWriter, r *http.Request, err error) {
	api.WriteParamErrorOf(w, r, err, paramErrors)
}

// paramErrors reads this package's copies of the generated parameter
// errors, which are distinct types from package api's: the part of
// WriteParamError that cannot be shared.
var paramErrors = api.ParamErrorTypes{
	InvalidParamFormat:    api.ParamName(func(e *InvalidParamFormatError) string { return e.ParamName }),
	RequiredParam:         api.ParamName(func(e *RequiredParamError) string { return e.ParamName }),
	RequiredHeader:        api.ParamName(func(e *RequiredHeaderError) string { return e.ParamName }),
	TooManyValuesForParam: api.ParamName(func(e *TooManyValuesForParamError) string { return e.ParamName }),
	UnmarshalingParam:     api.ParamName(func(e *UnmarshalingParamError) string { return e.ParamName }),
	UnescapedCookieParam:  api.ParamName(func(e *UnescapedCookieParamError) string { return e.ParamName }),
}
