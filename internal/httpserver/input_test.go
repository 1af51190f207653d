package httpserver_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/trellistest"
)

// TestHeadOnGetRoutes: HEAD is served wherever GET is, with GET's status
// and headers and no body.
func TestHeadOnGetRoutes(t *testing.T) {
	ts := fixture.Start(t, fixture.AdminToken)
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/admin/openapi.yaml", "/admin/timers", "/admin/timers/stats"} {
		t.Run(path, func(t *testing.T) {
			get := fixture.Admin(t, ts, http.MethodGet, path)
			head := fixture.Admin(t, ts, http.MethodHead, path)
			if head.Status != get.Status || head.Status != http.StatusOK || len(head.Body) != 0 ||
				head.Header.Get("Content-Type") != get.Header.Get("Content-Type") {
				t.Fatalf("HEAD %d %q (%d bytes); GET %d %q: want GET's status and type, no body",
					head.Status, head.Header.Get("Content-Type"), len(head.Body), get.Status, get.Header.Get("Content-Type"))
			}
		})
	}
}

// TestReadyzQuotesRedis: a service started while its Redis was down, on a
// database that Redis then turns out not to have, says so in /readyz.
func TestReadyzQuotesRedis(t *testing.T) {
	port := trellistest.FreePort(t)
	ts := fixture.StartCounter(t, &fixture.CounterApp{},
		trellistest.WithRedisURL("redis://127.0.0.1:"+strconv.Itoa(port)+"/5"), trellistest.WithStorePrefix("readyz-quotes"))
	trellistest.StartRedisServerOn(t, port, "--databases", "2")
	var last *trellistest.Response
	trellistest.Eventually(t, 10*time.Second, "/readyz to quote Redis", func() bool {
		last = ts.Get(t, "/readyz")
		return last.Status == http.StatusServiceUnavailable && strings.Contains(string(last.Body), "DB index is out of range")
	})
	if last.Header.Get("Retry-After") == "" {
		t.Fatalf("no Retry-After on /readyz's 503")
	}
}
