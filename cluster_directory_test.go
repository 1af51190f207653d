package trellis_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/runtime"
	"github.com/trellis-go/trellis/trellistest"
)

// TestClusterLateRedisSharesEarlierRegistrations: an instance whose Redis
// answers only after its setup registered an actor with the receptionist
// shares that registration with the other instances once it joins.
func TestClusterLateRedisSharesEarlierRegistrations(t *testing.T) {
	testenv.Long(t)
	t.Cleanup(func() { testenv.WaitGoroutinesGone(t, "(*ConnPool).tryDial") }) // dials that failed before Redis answered
	port := trellistest.FreePort(t)
	url := "redis://127.0.0.1:" + strconv.Itoa(port) + "/0"
	prefix := "late-directory-" + uuid.NewString()[:8]
	key := runtime.NewServiceKey[string]("late-workers")
	late := trellistest.Start(t, func(h *trellis.Host, _ chi.Router) error {
		ref, err := runtime.Spawn(h.System, "late-worker", func() runtime.Behavior[string] {
			return runtime.ReceiveFunc(func(*runtime.Context[string], string) {})
		})
		if err != nil {
			return err
		}
		runtime.Register(h.System, key, ref)
		return nil
	}, trellistest.WithRedisURL(url), trellistest.WithStorePrefix(prefix))
	trellistest.StartRedisServerOn(t, port) // the keys die with the server
	// The late instance stops before Redis does: its goodbye withdraws
	// its registrations there.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := late.Shutdown(ctx); err != nil {
			t.Errorf("stop the late instance: %v", err)
		}
	})
	var other *runtime.System
	trellistest.Start(t, func(h *trellis.Host, _ chi.Router) error {
		other = h.System
		return nil
	}, trellistest.WithRedisURL(url), trellistest.WithStorePrefix(prefix))
	trellistest.Eventually(t, 30*time.Second, "the other instance to list the late instance's worker", func() bool {
		for _, ref := range runtime.Find(other, key) {
			if _, remote := runtime.Address(ref); remote && ref.Path() == "/user/late-worker" {
				return true
			}
		}
		return false
	})
}
