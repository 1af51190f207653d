package httpserver_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/internal/httpserver"
	"github.com/trellis-go/trellis/trellistest"
)

// walletSpec is a small service's contract: a wallet id with a pattern,
// a query limit with a maximum, a deposit body with bounds.
var walletSpec = []byte(`openapi: 3.0.3
info: {title: wallets, version: '1'}
paths:
  /wallets/{id}:
    parameters:
      - {name: id, in: path, required: true, schema: {type: string, pattern: '^[a-z0-9_-]{1,32}$'}}
    get:
      parameters:
        - {name: limit, in: query, schema: {type: integer, minimum: 1, maximum: 100}}
      responses: {'200': {description: the wallet}}
    post:
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [amount, memo]
              additionalProperties: false
              properties:
                amount: {type: integer, minimum: 1, maximum: 1000}
                memo: {type: string, minLength: 1}
                at: {type: string, format: date-time}
      responses: {'200': {description: deposited}}
`)

// walletHandler answers 200 with the body it read, so that a test sees
// what reached it.
func walletHandler(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append([]byte(`{"reached":true,"body":`), append(bytes.TrimSpace(orNull(body)), '}')...))
}

func orNull(b []byte) []byte {
	if len(b) == 0 || !strings.HasPrefix(strings.TrimSpace(string(b)), "{") {
		return []byte("null")
	}
	return b
}

// walletServer serves walletHandler behind the contract's validation.
func walletServer(t testing.TB) *httptest.Server {
	t.Helper()
	enforce, err := httpserver.EnforceContract(walletSpec)
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	r.Use(enforce)
	r.Get("/wallets/{id}", walletHandler)
	r.Post("/wallets/{id}", walletHandler)
	r.Get("/elsewhere", walletHandler)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv
}

// TestEnforceContract: a request that breaks a rule of the contract (a
// path pattern, a query maximum, a body's minLength, maximum, format,
// required or unknown field) is answered 400 naming each field and the
// rule; a valid one, a path the contract does not have, and a body the
// handler answers itself (not JSON, malformed) reach the handler.
func TestEnforceContract(t *testing.T) {
	srv := walletServer(t)
	tests := []struct {
		name, method, path, contentType, body string
		want                                  map[string]string // field → a word of the rule; nil: reaches the handler
	}{
		{"valid get", "GET", "/wallets/w-1?limit=5", "", "", nil},
		{"valid deposit", "POST", "/wallets/w-1", "application/json", `{"amount":5,"memo":"rent","at":"2026-01-02T03:04:05Z"}`, nil},
		{"path pattern", "GET", "/wallets/UPPER_case", "", "", map[string]string{"id": "pattern"}},
		{"deposit to a bad id", "POST", "/wallets/UPPER_case", "application/json", `{"amount":5,"memo":"x"}`, map[string]string{"id": "pattern"}},
		{"query maximum", "GET", "/wallets/w-1?limit=1000", "", "", map[string]string{"limit": "maximum"}},
		{"body rules", "POST", "/wallets/w-1", "application/json", `{"amount":5000,"memo":"","at":"tomorrow"}`,
			map[string]string{"amount": "maximum", "memo": "minLength", "at": "format"}},
		{"required and unknown", "POST", "/wallets/w-1", "application/json", `{"amount":5,"extra":1}`,
			map[string]string{"memo": "required", "extra": "additionalProperties"}},
		{"not in the contract", "GET", "/elsewhere", "", "", nil},
		{"not JSON: the handler's 415", "POST", "/wallets/w-1", "text/plain", `amount=5`, nil},
		{"malformed JSON: the handler's 400", "POST", "/wallets/w-1", "application/json", `{"amount":`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if tt.want == nil {
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"reached":true`) {
					t.Fatalf("%d %s, want the handler reached", resp.StatusCode, body)
				}
				if tt.body != "" && strings.HasPrefix(tt.body, "{\"amount\":5,") && !strings.Contains(string(body), tt.body) {
					t.Fatalf("the handler read %s, want the body sent", body)
				}
				return
			}
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != api.ContentTypeProblem {
				t.Fatalf("%d %s %s, want a 400 problem", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			for field, rule := range tt.want {
				if !strings.Contains(string(body), `"field":"`+field+`","message":"`) ||
					!strings.Contains(string(body), rule) {
					t.Errorf("problem %s names no %s breaking %s", body, field, rule)
				}
			}
		})
	}
}

// TestContractEnforcedByTheService: a service started WithContract
// answers a path that breaks its contract's pattern with a 400 problem,
// before its handler runs.
func TestContractEnforcedByTheService(t *testing.T) {
	reached := false
	ts := trellistest.Start(t, func(_ *trellis.Host, r chi.Router) error {
		r.Get("/wallets/{id}", func(w http.ResponseWriter, r *http.Request) {
			reached = true
			walletHandler(w, r)
		})
		return nil
	}, trellistest.WithServiceOptions(trellis.WithContract(walletSpec)))
	resp := ts.Get(t, "/wallets/UPPER_case")
	if p := resp.Problem(t); resp.Status != http.StatusBadRequest || len(p.Errors) != 1 || p.Errors[0].Field != "id" || reached {
		t.Fatalf("%d %s (handler reached: %v), want 400 naming id", resp.Status, resp.Body, reached)
	}
	if resp := ts.Get(t, "/wallets/lower"); resp.Status != http.StatusOK {
		t.Fatalf("a valid id: %d %s", resp.Status, resp.Body)
	}
}
