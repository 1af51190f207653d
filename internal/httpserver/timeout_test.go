package httpserver_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/trellistest"
)

// TestRequestTimeout: a request that outlives Config.RequestTimeout gets
// 504, and the command it carried is not run.
func TestRequestTimeout(t *testing.T) {
	ts := fixture.StartCounter(t, &fixture.CounterApp{StallID: "stalled"}, trellistest.WithConfig(func(c *trellis.Config) {
		c.RequestTimeout = 50 * time.Millisecond
	}))
	resp := ts.Post(t, "/counters/stalled/increase", map[string]int{"by": 1})
	if resp.Status != http.StatusGatewayTimeout {
		t.Fatalf("status %d, want 504: %s", resp.Status, resp.Body)
	}
	if p := resp.Problem(t); p.Detail != "the request did not finish in time" || p.CorrelationId == "" {
		t.Errorf("problem %s: want the timeout detail and a correlation id", resp.Body)
	}
	if c := fixture.Counter(t, ts.Get(t, "/counters/stalled")); c.Value != 0 {
		t.Errorf("value %d: the timed-out command ran", c.Value)
	}
}
