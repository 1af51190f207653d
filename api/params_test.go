package api_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/api/admin"
)

// TestWriteParamError: every generated parameter error, of package api
// and of package api/admin (distinct types, one shared mapping), is a 400
// problem naming the parameter; any other error, the other package's
// types included, is a 400 without fields.
func TestWriteParamError(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name     string // case name
		apiErr   error  // what package api's router reports, about parameter "p"
		adminErr error  // the same from package admin's router
		message  string // what the problem says of "p" ("": it names no field)
	}{
		{"format", &api.InvalidParamFormatError{ParamName: "p", Err: boom}, &admin.InvalidParamFormatError{ParamName: "p", Err: boom}, "is not in the right format"},
		{"required", &api.RequiredParamError{ParamName: "p"}, &admin.RequiredParamError{ParamName: "p"}, "is required"},
		{"header", &api.RequiredHeaderError{ParamName: "p", Err: boom}, &admin.RequiredHeaderError{ParamName: "p", Err: boom}, "is required"},
		{"many", &api.TooManyValuesForParamError{ParamName: "p", Count: 2}, &admin.TooManyValuesForParamError{ParamName: "p", Count: 2}, "must be given once"},
		{"unmarshaling", &api.UnmarshalingParamError{ParamName: "p", Err: boom}, &admin.UnmarshalingParamError{ParamName: "p", Err: boom}, "is not valid JSON"},
		{"cookie", &api.UnescapedCookieParamError{ParamName: "p", Err: boom}, &admin.UnescapedCookieParamError{ParamName: "p", Err: boom}, "is not properly escaped"},
		{"wrapped", fmt.Errorf("bind: %w", &api.RequiredParamError{ParamName: "p"}), fmt.Errorf("bind: %w", &admin.RequiredParamError{ParamName: "p"}), "is required"},
		{"another error", boom, boom, ""},
		{"the other package's type", &admin.RequiredParamError{ParamName: "p"}, &api.RequiredParamError{ParamName: "p"}, ""},
	}
	for _, tt := range tests {
		var want []api.FieldError
		if tt.message != "" {
			want = []api.FieldError{{Field: "p", Message: tt.message}}
		}
		for _, h := range []struct {
			pkg   string                                          // the generated package
			write func(http.ResponseWriter, *http.Request, error) // its ErrorHandlerFunc
			err   error                                           // the error of its own types
		}{{"api", api.WriteParamError, tt.apiErr}, {"admin", admin.WriteParamError, tt.adminErr}} {
			t.Run(h.pkg+" "+tt.name, func(t *testing.T) {
				w := httptest.NewRecorder()
				h.write(w, httptest.NewRequest(http.MethodGet, "/x", nil), h.err)
				var p api.Problem
				if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
					t.Fatalf("body %s: %v", w.Body, err)
				}
				if w.Code != http.StatusBadRequest || p.Detail != "the request is invalid" || fmt.Sprint(p.Errors) != fmt.Sprint(want) {
					t.Fatalf("got %d %s, want 400 with fields %v", w.Code, w.Body, want)
				}
			})
		}
	}
}
