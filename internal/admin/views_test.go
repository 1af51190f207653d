package admin_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/api/admin"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/samples/counter"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/views"
)

// counterRow is the row of the test's view: a counter's value.
type counterRow struct {
	Value int64 `json:"value"`
}

var counterValues = views.Define("counter-values", counter.Entity, func(c views.Change[counter.Counter]) views.Update[counterRow] {
	if c.Deleted {
		return views.Delete[counterRow]()
	}
	return views.Upsert(counterRow{Value: c.State.Value})
})

// TestAdminViews: GET /admin/views lists each view with its generation,
// answering once built, projected on every shard (no cluster) and caught
// up, as the contract says; a service without views lists none.
func TestAdminViews(t *testing.T) {
	app := func(h *trellis.Host, r chi.Router) error {
		if err := fixture.App(h, r); err != nil {
			return err
		}
		return counterValues.Start(h.Views())
	}
	ts := trellistest.Start(t, app, trellistest.WithConfig(func(c *trellis.Config) { c.AdminToken = fixture.AdminToken }))
	ts.HTTP.Transport = trellistest.CheckContracts(t, ts.HTTP.Transport, api.Spec)
	fixture.Increase(t, ts, "v-1")
	var got []admin.View
	testenv.Eventually(t, 10*time.Second, "the view listed, answering, on every shard, caught up", func() bool {
		resp := fixture.Admin(t, ts, http.MethodGet, "/admin/views")
		if resp.Status != http.StatusOK {
			t.Fatalf("GET /admin/views: %d %s", resp.Status, resp.Body)
		}
		resp.JSON(t, &got)
		return len(got) == 1 && got[0].Answering && got[0].Shards == 256 && got[0].LagChanges == 0
	})
	if v := got[0]; v.Name != "counter-values" || len(v.Generation) <= len(v.Name) || v.Generation[:len(v.Name)+1] != "counter-values@" || v.LagSeconds != 0 {
		t.Errorf("view %+v, want counter-values, its generation, no lag", v)
	}

	none := fixture.Start(t, fixture.AdminToken)
	none.HTTP.Transport = trellistest.CheckContracts(t, none.HTTP.Transport, api.Spec)
	if resp := fixture.Admin(t, none, http.MethodGet, "/admin/views"); resp.Status != http.StatusOK || string(resp.Body) != "[]\n" {
		t.Errorf("GET /admin/views without views: %d %q, want 200 []", resp.Status, resp.Body)
	}
}
