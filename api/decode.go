package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/trellis-go/trellis/internal/contractbody"
)

// DefaultMaxBodyBytes is the largest request body Decode reads when the
// server set no smaller limit (the service's middleware sets one per
// request with http.MaxBytesReader).
const DefaultMaxBodyBytes = 1 << 20

// maxDepth bounds how deeply a request body may nest, so that a hostile
// body cannot exhaust the stack of the parser.
const maxDepth = 64

// Decode reads r's body, which must be exactly one JSON value, into dst and
// validates it. Every failure is a *RequestError that names what is wrong,
// for WriteError to answer:
//
//   - 415 when the Content-Type is given and is not JSON (application/json
//     or any +json type);
//   - 413 when the body is larger than the limit;
//   - 408 when the body has not arrived by the request's deadline;
//   - 400 when the body is empty, is malformed JSON (the detail gives the
//     byte offset, and the field being read there is named), holds more
//     than one value, or is not UTF-8 (the field holding the first invalid
//     byte is named: encoding/json would store it as U+FFFD);
//   - 400 naming each field that is unknown (matching is exact, including
//     case), given twice, or required and missing (or null where it cannot
//     be null);
//   - 400 naming the field whose value has the wrong type;
//   - 400 naming each field that breaks a constraint of its `validate` tag
//     (go-playground/validator v10; the contract puts these tags on the
//     generated types with x-oapi-codegen-extra-tags).
//
// Fields are named as the client spells them: their JSON names, as a path
// such as `items[2].name`.
//
// A struct field is required when its json tag has neither omitempty nor
// omitzero — exactly how oapi-codegen renders a property listed in the
// schema's `required`. A required pointer field (a required nullable
// property) must be present but may be null; any other required field must
// be present and not null. Presence is checked against the JSON itself, so
// a required integer may still be 0 when its constraints allow it:
// `validate:"required"` is not needed, and would wrongly treat a present
// zero as missing.
//
// A body that the service's contract (trellis.WithContract) has already
// validated against the operation's schema is not checked again for the
// rules the contract states (required and unknown fields, the validate
// tags): the contract is the rule, and the Go type is generated from it.
func Decode[T any](r *http.Request, dst *T) error {
	if err := checkContentType(r); err != nil {
		return err
	}
	checked, byContract := r.Body.(*contractbody.Body)
	var body []byte
	if byContract {
		body = checked.Bytes
	} else {
		var err error
		if body, err = readBody(r); err != nil {
			return err
		}
		if !json.Valid(body) {
			return diagnose(body)
		}
	}
	if !utf8.Valid(body) {
		return invalidUTF8(body)
	}
	if !byContract {
		if fields := checkShape(typeOf[T](), body); len(fields) > 0 {
			return &RequestError{Status: http.StatusBadRequest, Detail: "the request body is invalid", Fields: fields}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return typeError(err, typeOf[T](), body)
	}
	if byContract {
		return nil
	}
	return validateValue(dst)
}

// checkContentType refuses a body that says it is not JSON. A request
// without a Content-Type is read as JSON.
func checkContentType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" || ct == ContentTypeJSON { // the usual cases, without parsing
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == ContentTypeJSON || strings.HasSuffix(mt, "+json")) {
		return nil
	}
	return &RequestError{
		Status: http.StatusUnsupportedMediaType,
		Detail: fmt.Sprintf("the request body must be %s, not %s", ContentTypeJSON, ct),
	}
}

// readBody reads the whole body, up to the server's limit.
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, emptyBody()
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, DefaultMaxBodyBytes+1))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, bodyTooLarge(tooLarge.Limit, err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, &RequestError{
			Status: http.StatusRequestTimeout,
			Detail: "the request body did not arrive within the request timeout",
			Err:    err,
		}
	case err != nil:
		return nil, &RequestError{Status: http.StatusBadRequest, Detail: "the request body could not be read", Err: err}
	case len(body) > DefaultMaxBodyBytes:
		return nil, bodyTooLarge(DefaultMaxBodyBytes, nil)
	case len(bytes.TrimSpace(body)) == 0:
		return nil, emptyBody()
	}
	return body, nil
}

func emptyBody() error {
	return &RequestError{Status: http.StatusBadRequest, Detail: "the request body is empty; it must be one JSON value"}
}

func bodyTooLarge(limit int64, err error) error {
	return &RequestError{
		Status: http.StatusRequestEntityTooLarge,
		Detail: "the request body is larger than " + strconv.FormatInt(limit, 10) + " bytes",
		Err:    err,
	}
}

// diagnose says what is wrong with a body that is not one valid JSON
// value: it reads it token by token, keeping track of where it is, so that
// the error gives the byte offset and names the field being read there.
// It runs only for bad bodies.
func diagnose(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	p := &parser{dec: dec}
	if err := p.value(0); err != nil {
		return p.malformed(err, len(body))
	}
	if _, err := dec.Token(); err != io.EOF {
		return &RequestError{
			Status: http.StatusBadRequest,
			Detail: fmt.Sprintf("the request body must hold exactly one JSON value; more follows at offset %d", dec.InputOffset()),
		}
	}
	return &RequestError{Status: http.StatusBadRequest, Detail: "malformed JSON"}
}

// invalidUTF8 is the 400 of a well-formed body that is not UTF-8: it
// names the field whose key or string value holds the first invalid byte.
func invalidUTF8(body []byte) error {
	off := int64(len(body))
	for i := 0; i < len(body); {
		r, n := utf8.DecodeRune(body[i:])
		if r == utf8.RuneError && n == 1 {
			off = int64(i)
			break
		}
		i += n
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	p := &parser{dec: dec, stopAt: off, stopping: true}
	_ = p.value(0) // errStop, with p.errPath set where the byte is
	re := &RequestError{
		Status: http.StatusBadRequest,
		Detail: fmt.Sprintf("the request body is not valid UTF-8 (at offset %d)", off),
	}
	if p.errPath != "" {
		re.Detail = "the request body is invalid"
		re.Fields = []FieldError{{Field: p.errPath, Message: fmt.Sprintf("holds a byte that is not UTF-8 (at offset %d)", off)}}
	}
	return re
}

// errStop ends a walk that found the token it was looking for.
var errStop = errors.New("stop")

type parser struct {
	dec     *json.Decoder
	path    []string // the path to the value being read: keys and "[i]"
	errPath string   // the path where the error was found

	// stopping: the walk stops (errStop, errPath set) at the first token
	// that ends past offset stopAt, the one that holds that byte.
	stopping bool
	stopAt   int64
}

// passed stops the walk once the token just read holds byte stopAt.
func (p *parser) passed() error {
	if p.stopping && p.dec.InputOffset() > p.stopAt {
		return p.fail(errStop)
	}
	return nil
}

func (p *parser) value(depth int) error {
	if depth > maxDepth {
		return p.fail(fmt.Errorf("nested more than %d levels deep", maxDepth))
	}
	tok, err := p.dec.Token()
	if err != nil {
		return p.fail(err)
	}
	if err := p.passed(); err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		for p.dec.More() {
			kt, err := p.dec.Token()
			if err != nil {
				return p.fail(err)
			}
			key, _ := kt.(string) // More and Token guarantee a string key here
			p.path = append(p.path, key)
			if err := p.passed(); err != nil {
				return err
			}
			if err := p.value(depth + 1); err != nil {
				return err
			}
			p.path = p.path[:len(p.path)-1]
		}
	case json.Delim('['):
		for i := 0; p.dec.More(); i++ {
			p.path = append(p.path, "["+strconv.Itoa(i)+"]")
			if err := p.value(depth + 1); err != nil {
				return err
			}
			p.path = p.path[:len(p.path)-1]
		}
	default:
		return nil
	}
	if _, err := p.dec.Token(); err != nil { // the closing '}' or ']'
		return p.fail(err)
	}
	return nil
}

// fail records where err was found.
func (p *parser) fail(err error) error {
	if p.errPath == "" {
		p.errPath = joinPath(p.path)
	}
	return err
}

// malformed turns a parse error into a 400 that gives the offset and names
// the field being read, when there was one.
func (p *parser) malformed(err error, size int) error {
	offset := p.dec.InputOffset()
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &syntax):
		offset = syntax.Offset
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		offset, err = int64(size), errors.New("unexpected end of JSON input")
	}
	detail := fmt.Sprintf("malformed JSON at offset %d: %v", offset, err)
	re := &RequestError{Status: http.StatusBadRequest, Detail: detail, Err: err}
	if p.errPath != "" {
		re.Fields = []FieldError{{Field: p.errPath, Message: fmt.Sprintf("is malformed JSON (at offset %d)", offset)}}
	}
	return re
}

// joinPath renders a path as `a.b[2].c`.
func joinPath(path []string) string {
	var b strings.Builder
	for _, s := range path {
		if b.Len() > 0 && !strings.HasPrefix(s, "[") {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}

// typeError turns the error of the final decode of body into t into a
// 400. The shape was checked already, so it is a value of the wrong type,
// or a custom unmarshaler's refusal, named by its field too.
func typeError(err error, t reflect.Type, body []byte) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return &RequestError{
				Status: http.StatusBadRequest,
				Detail: fmt.Sprintf("the request body must be %s, not %s", jsonKind(te.Type), te.Value),
				Err:    err,
			}
		}
		return &RequestError{
			Status: http.StatusBadRequest,
			Detail: "the request body is invalid",
			Fields: []FieldError{{Field: te.Field, Message: fmt.Sprintf("must be %s, not %s", jsonKind(te.Type), te.Value)}},
			Err:    err,
		}
	}
	if field := refusedField(t, body); field != "" {
		return &RequestError{Status: http.StatusBadRequest, Detail: "the request body is invalid",
			Fields: []FieldError{{Field: field, Message: "is invalid: " + err.Error()}}, Err: err}
	}
	return &RequestError{Status: http.StatusBadRequest, Detail: "the request body is invalid: " + err.Error(), Err: err}
}

// jsonKind names a Go type the way a JSON client thinks of it.
func jsonKind(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "a value"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "a " + t.String()
}
