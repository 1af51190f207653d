package admin_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/trellistest"
)

// TestAdminAuth: every admin route needs the admin token. Without a
// configured token each answers 403 saying how to enable the admin API;
// with one, a missing header, another scheme, an empty credential or a
// wrong token get 401 with a Bearer challenge, and the right token gets
// through. Neither token ever reaches the log.
func TestAdminAuth(t *testing.T) {
	disabled := fixture.Start(t, "")
	enabled := fixture.Start(t, fixture.AdminToken)
	// A timer for GET and DELETE to find with the right token.
	for _, ts := range []*trellistest.Service{disabled, enabled} {
		call, err := fixture.OK.Deferred(fixture.Order{Order: "auth"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ts.Host().Timers.Create(context.Background(), "auth-timer", time.Hour, call); err != nil {
			t.Fatal(err)
		}
	}
	wrongToken := strings.Repeat("x", len(fixture.AdminToken)) // same length: only the content differs

	routes := []struct {
		method string // HTTP method
		path   string // admin route
		ok     int    // status with the right token
	}{
		{http.MethodGet, "/admin/timers", http.StatusOK},
		{http.MethodGet, "/admin/timers?limit=garbage", http.StatusBadRequest}, // auth comes before parameters
		{http.MethodGet, "/admin/timers/stats", http.StatusOK},
		{http.MethodGet, "/admin/timers/auth-timer", http.StatusOK},
		{http.MethodGet, "/admin/cluster", http.StatusOK},
		{http.MethodGet, "/admin/cluster/shards", http.StatusOK},
		{http.MethodDelete, "/admin/timers/auth-timer", http.StatusNoContent}, // last: it removes the timer
	}
	cases := []struct {
		name      string               // case name
		ts        *trellistest.Service // the service: admin API disabled or enabled
		authz     string               // Authorization header ("" for none)
		status    int                  // expected status (0: the route's ok status)
		detail    string               // substring of the problem's detail (when status != 0)
		challenge string               // expected WWW-Authenticate prefix ("" for none)
	}{
		{name: "no token configured, no header", ts: disabled, status: 403, detail: "set to a secret"},
		{name: "no token configured, some token", ts: disabled, authz: "Bearer " + fixture.AdminToken, status: 403, detail: "TRELLIS_ADMIN_TOKEN"},
		{name: "missing header", ts: enabled, status: 401, detail: "Authorization: Bearer", challenge: `Bearer realm="trellis-admin"`},
		{name: "wrong scheme", ts: enabled, authz: "Basic " + fixture.AdminToken, status: 401, detail: "Authorization: Bearer", challenge: "Bearer"},
		{name: "scheme only", ts: enabled, authz: "Bearer", status: 401, detail: "Authorization: Bearer", challenge: "Bearer"},
		{name: "empty credential", ts: enabled, authz: "Bearer   ", status: 401, detail: "Authorization: Bearer", challenge: "Bearer"},
		{name: "wrong token", ts: enabled, authz: "Bearer " + wrongToken, status: 401, detail: "not the admin token", challenge: `Bearer realm="trellis-admin", error="invalid_token"`},
		{name: "prefix of the token", ts: enabled, authz: "Bearer " + fixture.AdminToken[:len(fixture.AdminToken)-1], status: 401, detail: "not the admin token", challenge: "Bearer"},
		{name: "token with a suffix", ts: enabled, authz: "Bearer " + fixture.AdminToken + "x", status: 401, detail: "not the admin token", challenge: "Bearer"},
		{name: "lower-case scheme, right token", ts: enabled, authz: "bearer " + fixture.AdminToken},
		{name: "right token", ts: enabled, authz: "Bearer " + fixture.AdminToken},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, rt := range routes {
				if tc.status == 0 && rt.method == http.MethodDelete && tc.name != "right token" {
					continue // the timer must still be there for the last case
				}
				resp := fixture.Send(t, tc.ts, rt.method, rt.path, tc.authz)
				want := tc.status
				if want == 0 {
					want = rt.ok
				}
				if resp.Status != want {
					t.Fatalf("%s %s: status %d, want %d: %s", rt.method, rt.path, resp.Status, want, resp.Body)
				}
				if tc.status != 0 {
					if p := resp.Problem(t); !strings.Contains(p.Detail, tc.detail) {
						t.Errorf("%s %s: detail %q, want it to contain %q", rt.method, rt.path, p.Detail, tc.detail)
					}
				}
				if got := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, tc.challenge) || (tc.challenge == "") != (got == "") {
					t.Errorf("%s %s: WWW-Authenticate %q, want %q", rt.method, rt.path, got, tc.challenge)
				}
			}
		})
	}

	for _, ts := range []*trellistest.Service{disabled, enabled} {
		logs := ts.Logs()
		if !strings.Contains(logs, "admin request refused") {
			t.Errorf("the refusals were not logged")
		}
		for _, secret := range []string{fixture.AdminToken[:16], wrongToken[:16]} {
			if strings.Contains(logs, secret) {
				t.Errorf("the log contains a token (%q…)", secret)
			}
		}
	}
}

// TestAdminOpenRoutes: /metrics and the probes need no token, also when
// the admin API is enabled; unknown paths under /admin are plain 404s.
func TestAdminOpenRoutes(t *testing.T) {
	ts := fixture.Start(t, fixture.AdminToken)
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		if resp := ts.Get(t, path); resp.Status != http.StatusOK {
			t.Errorf("GET %s without a token: %d %s", path, resp.Status, resp.Body)
		}
	}
	resp := fixture.Admin(t, ts, http.MethodGet, "/admin/nope")
	if resp.Status != http.StatusNotFound {
		t.Errorf("GET /admin/nope: %d %s", resp.Status, resp.Body)
	}
	resp.Problem(t)
}
