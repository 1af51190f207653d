package trellis_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/trellistest"
)

// TestReadinessCheck: an application's own check makes /readyz answer 503
// naming it while it fails, and 200 once it passes; /metrics shows it as
// trellis_readiness_check 0 or 1.
func TestReadinessCheck(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	ts := trellistest.Start(t, func(h *trellis.Host, _ chi.Router) error {
		return h.AddReadinessCheck("mailer", func(context.Context) error {
			if failing.Load() {
				return errors.New("mailer stopped")
			}
			return nil
		})
	})
	for _, tc := range []struct {
		failing bool
		status  int
		gauge   string
	}{{true, http.StatusServiceUnavailable, "0"}, {false, http.StatusOK, "1"}} {
		failing.Store(tc.failing)
		resp := ts.Get(t, "/readyz")
		if resp.Status != tc.status {
			t.Fatalf("failing %t: /readyz %d, want %d: %s", tc.failing, resp.Status, tc.status, resp.Body)
		}
		if tc.failing {
			if p := resp.Problem(t); p.Detail != "mailer is not ready" {
				t.Errorf("/readyz detail %q", p.Detail)
			}
		}
		if want := `trellis_readiness_check{check="mailer"} ` + tc.gauge; !strings.Contains(string(ts.Get(t, "/metrics").Body), want) {
			t.Errorf("failing %t: /metrics lacks %s", tc.failing, want)
		}
	}
}
