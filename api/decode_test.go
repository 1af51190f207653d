package api_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/internal/contractbody"
)

// order exercises what the counter's body cannot: nesting, arrays,
// optional, nullable and opaque fields, and several constraint kinds.
type order struct {
	Customer string          `json:"customer" validate:"min=1,max=10"`
	Items    []item          `json:"items" validate:"min=1,dive"`
	Note     string          `json:"note,omitempty" validate:"max=5"`
	Coupon   *string         `json:"coupon"` // required but nullable
	Due      *time.Time      `json:"due,omitempty"`
	Tags     []string        `json:"tags,omitempty"`
	Extra    map[string]item `json:"extra,omitempty"`
}

type item struct {
	SKU string `json:"sku" validate:"oneof=apple pear"`
	Qty int    `json:"qty" validate:"gte=1"`
}

// TestDecodeNamesFields pins how Decode names fields beyond the HTTP-level
// cases: JSON paths with indexes, required-but-nullable fields, opaque
// types, and the constraint messages.
func TestDecodeNamesFields(t *testing.T) {
	const valid = `{"customer":"ann","items":[{"sku":"apple","qty":1}],"coupon":null}`
	tests := []struct {
		name    string // case name
		body    string // request body
		status  int    // expected status (0: no error)
		field   string // field the error must name ("" when the detail says it)
		message string // substring of that field's message, or of the detail
	}{
		{name: "valid", body: valid},
		{name: "valid with optional fields", body: `{"customer":"ann","items":[{"sku":"pear","qty":2}],"coupon":"X","due":"2030-01-02T03:04:05Z","tags":["a"]}`},
		{name: "nullable required field missing", body: `{"customer":"ann","items":[{"sku":"apple","qty":1}]}`, status: 400, field: "coupon", message: "is required"},
		{name: "non-nullable required field null", body: `{"customer":null,"items":[{"sku":"apple","qty":1}],"coupon":null}`, status: 400, field: "customer", message: "must not be null"},
		{name: "unknown nested field", body: `{"customer":"ann","items":[{"sku":"apple","qty":1},{"sku":"pear","qty":1,"colour":"red"}],"coupon":null}`, status: 400, field: "items[1].colour", message: "not a known field"},
		{name: "missing nested field", body: `{"customer":"ann","items":[{"sku":"apple"}],"coupon":null}`, status: 400, field: "items[0].qty", message: "is required"},
		{name: "malformed inside an array", body: `{"customer":"ann","items":[{"sku":"apple","qty":}]}`, status: 400, field: "items[0].qty", message: "malformed JSON"},
		{name: "nested wrong type", body: `{"customer":"ann","items":[{"sku":"apple","qty":"1"}],"coupon":null}`, status: 400, field: "items.qty", message: "must be an integer"},
		{name: "opaque type refuses its value", body: `{"customer":"ann","items":[{"sku":"apple","qty":1}],"coupon":null,"due":"tomorrow"}`, status: 400, field: "due", message: "is invalid: parsing time"},
		{name: "string too long", body: `{"customer":"abcdefghijk","items":[{"sku":"apple","qty":1}],"coupon":null}`, status: 400, field: "customer", message: "at most 10 characters"},
		{name: "too few items", body: `{"customer":"ann","items":[],"coupon":null}`, status: 400, field: "items", message: "at least 1 items"},
		{name: "not one of", body: `{"customer":"ann","items":[{"sku":"plum","qty":1}],"coupon":null}`, status: 400, field: "items[0].sku", message: "one of: apple, pear"},
		{name: "optional field constraint", body: `{"customer":"ann","items":[{"sku":"apple","qty":1}],"coupon":null,"note":"too long"}`, status: 400, field: "note", message: "at most 5 characters"},
		{name: "deep nesting where a string belongs", body: `{"customer":"ann","items":[{"sku":"apple","qty":1}],"coupon":null,"tags":[` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `]}`, status: 400, field: "tags", message: "must be a string"},
		{name: "deep nesting in malformed JSON", body: `{"tags":` + strings.Repeat("[", 100) + `}`, status: 400, field: "tags" + strings.Repeat("[0]", 64), message: "malformed"},
		{name: "duplicate nested field", body: `{"customer":"ann","items":[{"sku":"apple","qty":1,"qty":2}],"coupon":null}`, status: 400, field: "items[0].qty", message: "more than once"},
		{name: "invalid UTF-8 in a string", body: "{\"customer\":\"an\xffn\",\"items\":[{\"sku\":\"apple\",\"qty\":1}],\"coupon\":null}", status: 400, field: "customer", message: "not UTF-8 (at offset 15)"},
		{name: "invalid UTF-8 in a nested string", body: "{\"customer\":\"ann\",\"items\":[{\"sku\":\"app\xc3le\",\"qty\":1}],\"coupon\":null}", status: 400, field: "items[0].sku", message: "not UTF-8"},
		{name: "invalid UTF-8 in a key", body: "{\"customer\":\"ann\",\"items\":[{\"sku\":\"apple\",\"qty\":1}],\"coupon\":null,\"t\xffgs\":[]}", status: 400, field: "t\ufffdgs", message: "not UTF-8"},
		{name: "invalid UTF-8 at the top", body: "\"\xff\"", status: 400, message: "not valid UTF-8 (at offset 1)"},
		{name: "escaped key", body: `{"customer":"ann","items":[{"sku":"apple","q\u0074y":1}],"coupon":null}`},
		{name: "unknown escaped key", body: `{"customer":"ann","items":[{"sku":"apple","qty":1,"\u00e9":1}],"coupon":null}`, status: 400, field: "items[0].é", message: "not a known field"},
		{name: "strings with brackets and escapes", body: `{"customer":"a]}\"[{,:\\ long","items":[{"sku":"apple","qty":1}],"coupon":"{[,:\\"}`, status: 400, field: "customer", message: "at most 10"},
		{name: "map values are checked", body: `{"customer":"ann","items":[{"sku":"apple","qty":1}],"coupon":null,"extra":{"a":{"sku":"pear","qty":1,"bad":true}}}`, status: 400, field: "extra.a.bad", message: "not a known field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(tt.body))
			var o order
			err := api.Decode(r, &o)
			if tt.status == 0 {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				return
			}
			var re *api.RequestError
			if !errors.As(err, &re) || re.Status != tt.status {
				t.Fatalf("err = %v, want a *RequestError with status %d", err, tt.status)
			}
			if tt.field == "" {
				if !strings.Contains(re.Detail, tt.message) {
					t.Fatalf("detail %q, want %q", re.Detail, tt.message)
				}
				return
			}
			for _, f := range re.Fields {
				if f.Field == tt.field && strings.Contains(f.Message, tt.message) {
					return
				}
			}
			t.Fatalf("fields %+v, want %q with %q", re.Fields, tt.field, tt.message)
		})
	}
}

// FuzzDecode: no body makes Decode panic, and a body it accepts is one the
// standard decoder accepts too, strictly.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"customer":"ann","items":[{"sku":"apple","qty":1}],"coupon":null}`,
		`{"customer":"a\"]}","items":[{"sku":"pear","qty":2,"qty":3}],"coupon":"x","extra":{"k":{"sku":"apple","qty":1}}}`,
		`{"tags":[[[[]]]],"due":"2030-01-02T03:04:05Z"}`, `[`, `{"a":`, `"\u00e9"`, `1e999`, `{"items":[{}]}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(body))
		var o order
		if err := api.Decode(r, &o); err != nil {
			var re *api.RequestError
			if !errors.As(err, &re) || re.Status != http.StatusBadRequest {
				t.Fatalf("Decode(%q) = %v, want a 400 *RequestError", body, err)
			}
			return
		}
		dec := json.NewDecoder(strings.NewReader(body))
		dec.DisallowUnknownFields()
		var again order
		if err := dec.Decode(&again); err != nil {
			t.Fatalf("Decode accepted %q, which encoding/json refuses: %v", body, err)
		}
	})
}

// TestDecodeLeavesTheContractsRules: a body the contract check has marked
// valid is decoded as it is, its rules not checked again (the contract
// states them); an unmarked one is checked.
func TestDecodeLeavesTheContractsRules(t *testing.T) {
	const body = `{"customer":"a name far too long","items":[{"sku":"apple","qty":1}],"coupon":null}`
	for _, tt := range []struct {
		name    string
		marked  bool
		wantErr bool
	}{
		{"unmarked: checked", false, true},
		{"marked by the contract: decoded", true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(body))
			if tt.marked {
				r.Body = contractbody.New([]byte(body))
			}
			var got order
			err := api.Decode(r, &got)
			if (err != nil) != tt.wantErr || (!tt.wantErr && got.Customer != "a name far too long") {
				t.Fatalf("Decode = %+v, %v; want an error: %v", got, err, tt.wantErr)
			}
		})
	}
}
