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

// The parameter errors of another generated package, as oapi-codegen
// writes them into every package it generates a router into: the same
// names and fields as admin's, but distinct types.
type (
	InvalidParamFormatError struct {
		ParamName string
		Err       error
	}
	RequiredParamError struct{ ParamName string }
)

func (e *InvalidParamFormatError) Error() string { return "format of " + e.ParamName }
func (e *RequiredParamError) Error() string      { return "missing " + e.ParamName }

// TooManyValuesForParamError has a parameter error's name but no ParamName field.
type TooManyValuesForParamError struct{ Count int }

func (e *TooManyValuesForParamError) Error() string { return "many" }

// TestWriteParamError: every generated parameter error, of any package
// (api/admin's and this test's own), wrapped or not, is a 400 problem
// naming the parameter; any other error is a 400 without fields.
func TestWriteParamError(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string // case name
		err     error  // what the generated router reports, about parameter "p"
		message string // what the problem says of "p" ("": it names no field)
	}{
		{"format", &admin.InvalidParamFormatError{ParamName: "p", Err: boom}, "is not in the right format"},
		{"required", &admin.RequiredParamError{ParamName: "p"}, "is required"},
		{"header", &admin.RequiredHeaderError{ParamName: "p", Err: boom}, "is required"},
		{"many", &admin.TooManyValuesForParamError{ParamName: "p", Count: 2}, "must be given once"},
		{"unmarshaling", &admin.UnmarshalingParamError{ParamName: "p", Err: boom}, "is not valid JSON"},
		{"cookie", &admin.UnescapedCookieParamError{ParamName: "p", Err: boom}, "is not properly escaped"},
		{"wrapped", fmt.Errorf("bind: %w", &admin.RequiredParamError{ParamName: "p"}), "is required"},
		{"joined", errors.Join(boom, &admin.RequiredParamError{ParamName: "p"}), "is required"},
		{"another package's format", &InvalidParamFormatError{ParamName: "p", Err: boom}, "is not in the right format"},
		{"another package's required, wrapped", fmt.Errorf("bind: %w", &RequiredParamError{ParamName: "p"}), "is required"},
		{"the name without ParamName", &TooManyValuesForParamError{Count: 2}, ""},
		{"another error", boom, ""},
		{"nil pointer", (*RequiredParamError)(nil), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want []api.FieldError
			if tt.message != "" {
				want = []api.FieldError{{Field: "p", Message: tt.message}}
			}
			w := httptest.NewRecorder()
			api.WriteParamError(w, httptest.NewRequest(http.MethodGet, "/x", nil), tt.err)
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
