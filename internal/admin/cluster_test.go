package admin_test

import (
	"net/http"
	"testing"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/trellistest"
)

// TestClusterNotEnabled: an instance that is not part of a cluster
// answers both cluster routes 200 with {"enabled": false} and nothing
// else, as the contract says (every response is checked against it). The
// routes of a cluster are tested with one, in the root package
// (TestClusterOperatorView).
func TestClusterNotEnabled(t *testing.T) {
	for _, sc := range []struct {
		name string
		opts func(testing.TB) []trellistest.Option
	}{
		{"memory", fixture.Stores[0].Opts},
		{"redis, cluster off", func(t testing.TB) []trellistest.Option {
			return []trellistest.Option{trellistest.WithRedisURL(trellistest.RedisURL(t)),
				trellistest.WithConfig(func(c *trellis.Config) { c.ClusterAddr = trellis.ClusterOff })}
		}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			ts := fixture.Start(t, fixture.AdminToken, sc.opts(t)...)
			ts.HTTP.Transport = trellistest.CheckContracts(t, ts.HTTP.Transport, api.Spec)
			for _, path := range []string{"/admin/cluster", "/admin/cluster/shards"} {
				resp := fixture.Admin(t, ts, http.MethodGet, path)
				if resp.Status != http.StatusOK || string(resp.Body) != `{"enabled":false}`+"\n" {
					t.Errorf("GET %s: %d %q, want 200 {\"enabled\":false}", path, resp.Status, resp.Body)
				}
				if got := resp.Header.Get("Cache-Control"); got != "no-store" {
					t.Errorf("GET %s: Cache-Control %q, want no-store", path, got)
				}
			}
		})
	}
}
