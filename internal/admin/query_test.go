package admin_test

import (
	"net/http"
	"testing"

	"github.com/trellis-go/trellis/internal/testkit/fixture"
)

// TestBadAdminQuery: a query string that does not parse is a 400 naming
// the parameter, once the token has been checked, rather than a value
// that url.Values drops (limit=%ZZ) and a default served in its place.
func TestBadAdminQuery(t *testing.T) {
	ts := fixture.Start(t, fixture.AdminToken)
	tests := []struct {
		name  string // case name
		query string // the raw query of GET /admin/timers
		field string // the parameter the 400 names
	}{
		{name: "bad escape in a value", query: "limit=%ZZ", field: "limit"},
		{name: "truncated escape", query: "name=abc%2", field: "name"},
		{name: "bad escape after a good pair", query: "limit=5&cursor=%G1", field: "cursor"},
		{name: "semicolon", query: "limit=5;name=x", field: "limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := fixture.Admin(t, ts, http.MethodGet, "/admin/timers?"+tt.query)
			if resp.Status != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", resp.Status, resp.Body)
			}
			if p := resp.Problem(t); len(p.Errors) != 1 || p.Errors[0].Field != tt.field {
				t.Fatalf("problem %s: want one error naming %q", resp.Body, tt.field)
			}
		})
	}
	// Without the token, the token is what is wrong.
	if resp := fixture.Send(t, ts, http.MethodGet, "/admin/timers?limit=%ZZ", ""); resp.Status != http.StatusUnauthorized {
		t.Fatalf("no token, bad query: %d %s, want 401", resp.Status, resp.Body)
	}
}
