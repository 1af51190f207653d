package api

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	"github.com/go-playground/validator/v10"
)

// validate checks the `validate` tags of decoded bodies. Fields are named by
// their JSON names, so that errors name them as the client spells them.
var validate = newValidator()

func newValidator() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			return ""
		case "":
			return f.Name
		}
		return name
	})
	return v
}

// Validator is the validator Decode uses, for registering custom
// validations at start-up (it is not safe to register while requests are
// being decoded).
func Validator() *validator.Validate { return validate }

// validateValue runs the validator over a decoded body: structs (and
// pointers to them) only, since tags live on struct fields.
func validateValue(dst any) error {
	t := reflect.TypeOf(dst)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	err := validate.Struct(dst)
	if err == nil {
		return nil
	}
	var verrs validator.ValidationErrors
	if !errors.As(err, &verrs) {
		return fmt.Errorf("validate the %s request body: %w", t, err)
	}
	fields := make([]FieldError, 0, len(verrs))
	for _, fe := range verrs {
		fields = append(fields, FieldError{Field: fieldPath(fe), Message: message(fe)})
	}
	return &RequestError{Status: http.StatusBadRequest, Detail: "the request body is invalid", Fields: fields, Err: err}
}

// fieldPath is the field's JSON path: its namespace without the root
// struct's Go name ("CounterIncrease.by" → "by").
func fieldPath(fe validator.FieldError) string {
	ns := fe.Namespace()
	if _, rest, ok := strings.Cut(ns, "."); ok {
		return rest
	}
	return ns
}

// message says what a constraint wants, in words a client understands.
func message(fe validator.FieldError) string {
	p := fe.Param()
	var unit string // what min, max and len count
	switch fe.Kind() {
	case reflect.String:
		unit = " characters"
	case reflect.Slice, reflect.Array, reflect.Map:
		unit = " items"
	}
	size := unit != ""
	switch fe.Tag() {
	case "required":
		return "is required"
	case "min", "gte":
		if size {
			return "must have at least " + p + unit
		}
		return "must be at least " + p
	case "max", "lte":
		if size {
			return "must have at most " + p + unit
		}
		return "must be at most " + p
	case "gt":
		if size {
			return "must have more than " + p + unit
		}
		return "must be greater than " + p
	case "lt":
		if size {
			return "must have fewer than " + p + unit
		}
		return "must be less than " + p
	case "len":
		if size {
			return "must have exactly " + p + unit
		}
		return "must be " + p
	case "eq":
		return "must be " + p
	case "ne":
		return "must not be " + p
	case "oneof":
		return "must be one of: " + strings.Join(strings.Fields(p), ", ")
	case "email":
		return "must be an email address"
	case "url", "http_url":
		return "must be a URL"
	case "uuid", "uuid4":
		return "must be a UUID"
	case "alphanum":
		return "must contain only letters and digits"
	}
	if p != "" {
		return fmt.Sprintf("must satisfy %s=%s", fe.Tag(), p)
	}
	return "must satisfy " + fe.Tag()
}
