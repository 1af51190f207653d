package console_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/trellis-go/trellis/internal/testkit/fixture"
)

// consolePolicy is the Content-Security-Policy every console response
// must carry: own script and style only, no inline code.
const consolePolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// TestConsoleHTTP checks the console's routes over real HTTP: what needs
// the token and what does not, the security headers, and that the page
// holds no inline code and no secret.
func TestConsoleHTTP(t *testing.T) {
	ts := fixture.Start(t, fixture.AdminToken)
	createTimers(t, ts)
	bearer := "Bearer " + fixture.AdminToken

	routes := []struct {
		name     string // subtest name
		method   string // request method ("" for GET)
		path     string // requested path
		authz    string // Authorization header ("" for none)
		status   int    // expected status
		mimeType string // expected Content-Type prefix
	}{
		{name: "page", path: "/admin/console/", status: 200, mimeType: "text/html"},
		{name: "script", path: "/admin/console/assets/console.js", status: 200, mimeType: "text/javascript"},
		{name: "script module", path: "/admin/console/assets/chart.js", status: 200, mimeType: "text/javascript"},
		{name: "style", path: "/admin/console/assets/console.css", status: 200, mimeType: "text/css"},
		{name: "icon", path: "/admin/console/assets/icon.svg", status: 200, mimeType: "image/svg+xml"},
		{name: "unknown asset", path: "/admin/console/assets/nope.js", status: 404, mimeType: "application/problem+json"},
		{name: "unknown page", path: "/admin/console/nope", status: 404, mimeType: "application/problem+json"},
		{name: "overview without token", path: "/admin/console/api/overview", status: 401, mimeType: "application/problem+json"},
		{name: "overview wrong token", path: "/admin/console/api/overview", authz: "Bearer not-the-admin-token-000000", status: 401, mimeType: "application/problem+json"},
		{name: "overview", path: "/admin/console/api/overview", authz: bearer, status: 200, mimeType: "application/json"},
		{name: "post", method: http.MethodPost, path: "/admin/console/", status: 405, mimeType: "application/problem+json"},
	}
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			method := rt.method
			if method == "" {
				method = http.MethodGet
			}
			resp := fixture.Send(t, ts, method, rt.path, rt.authz)
			body := resp.Body
			if resp.Status != rt.status {
				t.Fatalf("GET %s: %d, want %d: %s", rt.path, resp.Status, rt.status, body)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, rt.mimeType) {
				t.Errorf("Content-Type %q, want %s", ct, rt.mimeType)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); csp != consolePolicy {
				t.Errorf("Content-Security-Policy %q, want %q", csp, consolePolicy)
			}
			for h, want := range map[string]string{"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"} {
				if got := resp.Header.Get(h); got != want {
					t.Errorf("%s %q, want %q", h, got, want)
				}
			}
			if strings.Contains(string(body), fixture.AdminToken) {
				t.Errorf("the response carries the admin token: %s", body)
			}
		})
	}

	t.Run("page is headed as the whole service's console", func(t *testing.T) {
		page := string(get(t, ts, "/admin/console/", "").Body)
		h1 := regexp.MustCompile(`(?s)<h1>.*?>\s*(.*?)\s*</h1>`).FindStringSubmatch(page)
		if len(h1) < 2 || h1[1] != "Trellis console" {
			t.Errorf("the page's heading is %q, want %q", h1, "Trellis console")
		}
	})

	t.Run("page has no inline code", func(t *testing.T) {
		body := get(t, ts, "/admin/console/", "").Body
		page := string(body)
		scripts := regexp.MustCompile(`(?is)<script\b([^>]*)>(.*?)</script>`).FindAllStringSubmatch(page, -1)
		if len(scripts) != 1 {
			t.Errorf("%d script elements, want 1 (the console's own script)", len(scripts))
		}
		for _, s := range scripts {
			if !strings.Contains(s[1], `src="assets/`) || strings.TrimSpace(s[2]) != "" {
				t.Errorf("inline script: %s", s[0])
			}
		}
		forbidden := []struct {
			what string         // what the pattern finds
			re   *regexp.Regexp // the pattern
		}{
			{"a style element", regexp.MustCompile(`(?i)<style`)},
			{"a style attribute", regexp.MustCompile(`(?i)\sstyle\s*=`)},
			{"an event handler attribute", regexp.MustCompile(`(?i)\son[a-z]+\s*=`)},
			{"a javascript: URL", regexp.MustCompile(`(?i)javascript:`)},
			{"an input that a form would submit", regexp.MustCompile(`(?i)<input[^>]*\sname=`)},
		}
		for _, f := range forbidden {
			if m := f.re.FindString(page); m != "" {
				t.Errorf("the page has %s: %q", f.what, m)
			}
		}
	})

	t.Run("without trailing slash", func(t *testing.T) {
		resp := get(t, ts, "/admin/console", "")
		if resp.Status != http.StatusPermanentRedirect || resp.Header.Get("Location") != "/admin/console/" {
			t.Fatalf("GET /admin/console: %d Location %q, want 308 to /admin/console/", resp.Status, resp.Header.Get("Location"))
		}
	})

	t.Run("asset revalidation", func(t *testing.T) {
		resp := get(t, ts, "/admin/console/assets/console.js", "")
		etag := resp.Header.Get("ETag")
		if etag == "" {
			t.Fatal("no ETag on an asset")
		}
		again := get(t, ts, "/admin/console/assets/console.js", "", "If-None-Match", etag)
		body := again.Body
		if again.Status != http.StatusNotModified || len(body) != 0 {
			t.Fatalf("revalidation: %d with %d bytes, want 304 and none", again.Status, len(body))
		}
	})

	t.Run("overview body", func(t *testing.T) {
		resp := get(t, ts, "/admin/console/api/overview", bearer)
		body := resp.Body
		if resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("Cache-Control %q, want no-store: the overview is live state", resp.Header.Get("Cache-Control"))
		}
		var o struct {
			Now   string `json:"now"`
			Store struct {
				State string `json:"state"`
			} `json:"store"`
			Due struct {
				BucketSeconds int   `json:"bucketSeconds"`
				Overdue       int   `json:"overdue"`
				Counts        []int `json:"counts"`
				Partial       bool  `json:"partial"`
			} `json:"due"`
		}
		if err := json.Unmarshal(body, &o); err != nil {
			t.Fatalf("decode %s: %v", body, err)
		}
		if want := ts.Clock.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00"); !strings.HasPrefix(o.Now, want[:19]) {
			t.Errorf("now %q, want the service clock's %s", o.Now, want)
		}
		if o.Store.State != "ok" {
			t.Errorf("store state %q, want ok", o.Store.State)
		}
		got := append([]int{o.Due.Overdue}, o.Due.Counts...)
		if o.Due.BucketSeconds != 300 || !slices.Equal(got, fixtureChart) || o.Due.Partial {
			t.Errorf("chart: bucket %d s, overdue+counts %v, partial %v; want 300 s, %v, false", o.Due.BucketSeconds, got, o.Due.Partial, fixtureChart)
		}
	})

	t.Run("token never logged", func(t *testing.T) {
		if strings.Contains(ts.Logs(), fixture.AdminToken) {
			t.Fatal("the service log holds the admin token")
		}
	})
}

// TestConsoleOffWithoutToken: like the admin API, the console, its page
// included, answers 403 saying how to turn it on when no admin token is
// configured, whatever the request carries.
func TestConsoleOffWithoutToken(t *testing.T) {
	ts := fixture.Start(t, "")
	for _, path := range []string{"/admin/console/", "/admin/console", "/admin/console/assets/console.js", "/admin/console/api/overview"} {
		resp := get(t, ts, path, "Bearer "+fixture.AdminToken)
		body := resp.Body
		if resp.Status != http.StatusForbidden || !strings.Contains(string(body), "TRELLIS_ADMIN_TOKEN") {
			t.Errorf("GET %s without an admin token configured: %d %s, want 403 saying how to enable it", path, resp.Status, body)
		}
	}
}
