package httpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/internal/contractbody"
)

// EnforceContract returns the middleware that validates each request on a
// path of spec, the application's OpenAPI document, against it with
// kin-openapi's openapi3filter: its path, query and header parameters
// (pattern, format, minLength, maximum, enum, ...) and, for a JSON body
// that parses, the body's schema. A request that breaks a rule is
// answered 400, a problem naming each field and the rule it breaks. A
// request on no path of spec goes on untouched, and so do the body errors
// the handlers answer themselves in their own shapes: a body too large
// (413), of another media type (415), empty or malformed JSON (400).
// Security schemes are not checked here: the handlers authenticate.
func EnforceContract(spec []byte) (func(http.Handler) http.Handler, error) {
	doc, err := openapi3.NewLoader().LoadFromData(spec)
	if err != nil {
		return nil, fmt.Errorf("load the contract: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("the contract is not valid OpenAPI: %w", err)
	}
	doc.Servers = nil // match the paths wherever the service is deployed
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route the contract: %w", err)
	}
	opts := &openapi3filter.Options{
		MultiError:         true,
		ExcludeRequestBody: true, // validated below, once it is known to be JSON
		AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			route, params, err := router.FindRoute(r)
			if err != nil {
				next.ServeHTTP(w, r)
				return
			}
			in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route, Options: opts}
			fields := paramViolations(openapi3filter.ValidateRequest(r.Context(), in))
			fields = append(fields, bodyViolations(r, route.Operation)...)
			if len(fields) > 0 {
				api.WriteError(w, r, &api.RequestError{Status: http.StatusBadRequest,
					Detail: "the request does not match the service's contract", Fields: fields})
				return
			}
			next.ServeHTTP(w, r)
		})
	}, nil
}

// paramViolations are the fields of openapi3filter's errors.
func paramViolations(err error) []api.FieldError {
	if err == nil {
		return nil
	}
	var errs []error
	var multi openapi3.MultiError
	if errors.As(err, &multi) {
		errs = multi
	} else {
		errs = []error{err}
	}
	var fields []api.FieldError
	for _, e := range errs {
		var re *openapi3filter.RequestError
		switch {
		case errors.As(e, &re) && re.Parameter != nil:
			for _, m := range ruleMessages(re.Err, re.Reason) {
				fields = append(fields, api.FieldError{Field: re.Parameter.Name, Message: m})
			}
		case errors.As(e, &re) && re.RequestBody == nil:
			fields = append(fields, api.FieldError{Field: "request", Message: re.Error()})
		}
	}
	return fields
}

// ruleMessages says what rules err (a schema error, or several) breaks;
// reason when it is none.
func ruleMessages(err error, reason string) []string {
	var multi openapi3.MultiError
	if errors.As(err, &multi) {
		var out []string
		for _, e := range multi {
			out = append(out, ruleMessages(e, reason)...)
		}
		return out
	}
	var se *openapi3.SchemaError
	if errors.As(err, &se) {
		return []string{rule(se)}
	}
	if errors.Is(err, openapi3filter.ErrInvalidRequired) {
		return []string{"is required"}
	}
	if err != nil {
		return []string{err.Error()}
	}
	return []string{reason}
}

// rule is a schema error as "breaks <keyword>: <what>".
func rule(se *openapi3.SchemaError) string {
	if se.SchemaField == "" {
		return se.Reason
	}
	return fmt.Sprintf("breaks %s: %s", se.SchemaField, se.Reason)
}

// bodyViolations validates r's body against op's JSON request schema
// when the body is JSON that parses, and puts the body back for the
// handler; any other body is left to the handler.
func bodyViolations(r *http.Request, op *openapi3.Operation) []api.FieldError {
	if op == nil || op.RequestBody == nil || op.RequestBody.Value == nil || r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return nil
	}
	media := op.RequestBody.Value.Content.Get(mt)
	if media == nil || media.Schema == nil || media.Schema.Value == nil || !strings.HasSuffix(mt, "json") {
		return nil
	}
	body, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	if err != nil {
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
		return nil
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var v any
	if json.Unmarshal(body, &v) != nil {
		return nil
	}
	err = media.Schema.Value.VisitJSON(v, openapi3.MultiErrors())
	if err == nil {
		r.Body = contractbody.New(body) // api.Decode leaves the contract's rules to this check
		return nil
	}
	var fields []api.FieldError
	for _, e := range flatten(err) {
		var se *openapi3.SchemaError
		if errors.As(e, &se) {
			fields = append(fields, bodyField(se))
		}
	}
	return fields
}

// bodyField names the field a body's schema error is about: an unknown
// field is named itself (kin-openapi reports it on its object).
func bodyField(se *openapi3.SchemaError) api.FieldError {
	path := se.JSONPointer()
	if name, ok := strings.CutPrefix(se.Reason, `property "`); ok {
		if name, ok := strings.CutSuffix(name, `" is unsupported`); ok {
			return api.FieldError{Field: jsonPath(append(path, name)), Message: "breaks additionalProperties: is not a field of this object"}
		}
	}
	return api.FieldError{Field: jsonPath(path), Message: rule(se)}
}

// flatten is err's schema errors, multi errors opened.
func flatten(err error) []error {
	var multi openapi3.MultiError
	if errors.As(err, &multi) {
		var out []error
		for _, e := range multi {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// jsonPath renders a JSON pointer's tokens as the problems' field paths:
// items[2].name; the body itself is "body".
func jsonPath(tokens []string) string {
	if len(tokens) == 0 {
		return "body"
	}
	var b strings.Builder
	for _, t := range tokens {
		if _, err := strconv.Atoi(t); err == nil {
			b.WriteString("[" + t + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(t)
	}
	return b.String()
}

// errReader gives a read error again, for the handler to answer as it
// would have (413 for a body over the limit).
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
