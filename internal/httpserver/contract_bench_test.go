package httpserver_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis/internal/httpserver"
)

// BenchmarkEnforceContract is the round trip of a valid deposit (a path
// parameter with a pattern, a JSON body of three fields) over loopback,
// without and with the contract's validation: the cost per request is
// the difference (docs/api.md quotes it).
func BenchmarkEnforceContract(b *testing.B) {
	body := []byte(`{"amount":5,"memo":"rent","at":"2026-01-02T03:04:05Z"}`)
	for _, bb := range []struct {
		name    string
		enforce bool
	}{{"without", false}, {"with", true}} {
		b.Run(bb.name, func(b *testing.B) {
			r := chi.NewRouter()
			if bb.enforce {
				enforce, err := httpserver.EnforceContract(walletSpec)
				if err != nil {
					b.Fatal(err)
				}
				r.Use(enforce)
			}
			r.Post("/wallets/{id}", walletHandler)
			srv := httptest.NewServer(r)
			defer srv.Close()
			client := srv.Client()
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Post(srv.URL+"/wallets/w-1", "application/json", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}

// BenchmarkEnforceContractAlone is the validation of that deposit in
// process, without the network: its own cost, to set against the round
// trip above.
func BenchmarkEnforceContractAlone(b *testing.B) {
	body := []byte(`{"amount":5,"memo":"rent","at":"2026-01-02T03:04:05Z"}`)
	enforce, err := httpserver.EnforceContract(walletSpec)
	if err != nil {
		b.Fatal(err)
	}
	h := enforce(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/wallets/w-1", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d", w.Code)
		}
	}
}
