package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/timers"
)

// stateTimeout bounds the store checks of an overview, as /readyz bounds
// its own, so that a hung store is reported rather than waited for.
const stateTimeout = 2 * time.Second

// retryAfter is what an overview answered with 503 tells the page to wait.
const retryAfter = 5 * time.Second

// The store's states, as the page shows them.
const (
	// StateOK: the store answers and this instance runs timers.
	StateOK = "ok"
	// StateWiped: the timer store lost its data (flushed, or restarted
	// without persistence): timers created before then are gone.
	StateWiped = "wiped"
	// StateNotRunning: the store answers, but this instance does not run
	// timers (not started yet, or shutting down).
	StateNotRunning = "not running"
	// StateUnreachable: the store does not answer.
	StateUnreachable = "unreachable"
)

// overview is the body of GET api/overview.
type overview struct {
	// Now is the service's time: the page shows due times relative to it.
	Now   time.Time  `json:"now"`
	Store storeState `json:"store"`
	Due   dueChart   `json:"due"`
}

// storeState is the store's state and, unless it is ok, why.
type storeState struct {
	State  string `json:"state"`
	Detail string `json:"detail,omitempty"`
}

// overviewHandler answers GET api/overview: 200 with the store's state
// and the chart, or 503 with Retry-After while the store does not answer.
func overviewHandler(o Options) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		st, err := stateOf(ctx, o.Store, o.Timers)
		if err != nil {
			unavailable(w, r, st.Detail, err)
			return
		}
		now := o.Clock.Now()
		chart, err := chartDue(ctx, o.Timers, now, maxChartTimers)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				api.WriteError(w, r, err)
				return
			}
			unavailable(w, r, "the timer store did not answer the query for the chart", err)
			return
		}
		api.WriteJSON(w, r, http.StatusOK, overview{Now: now.UTC(), Store: st, Due: chart})
	}
}

// unavailable answers 503 with Retry-After, and logs why.
func unavailable(w http.ResponseWriter, r *http.Request, detail string, err error) {
	ctx := r.Context()
	api.Logger(ctx).Warn("console: store unavailable: "+detail,
		"requestId", api.RequestID(ctx), "err", err.Error())
	w.Header().Set("Retry-After", strconv.Itoa(int(retryAfter.Seconds())))
	api.WriteProblem(w, r, http.StatusServiceUnavailable, detail)
}

// stateOf tells the store's state. It returns an error (and the state
// StateUnreachable, whose Detail says which store) only when a store does
// not answer; a wiped store or a stopped scheduler is a state, not an
// error, since the console can still show what the store holds.
func stateOf(ctx context.Context, store Store, sched Timers) (storeState, error) {
	ctx, cancel := context.WithTimeout(ctx, stateTimeout)
	defer cancel()
	if err := store.Ping(ctx); err != nil {
		return storeState{State: StateUnreachable, Detail: "the state store is not reachable"},
			fmt.Errorf("ping the state store: %w", err)
	}
	err := sched.Ready(ctx)
	switch {
	case err == nil:
		return storeState{State: StateOK}, nil
	case errors.Is(err, timers.ErrStoreWiped):
		return storeState{State: StateWiped, Detail: wipedDetail(err)}, nil
	case errors.Is(err, timers.ErrNotStarted):
		return storeState{State: StateNotRunning, Detail: "this instance does not run timers (not started, or stopping)"}, nil
	default:
		return storeState{State: StateUnreachable, Detail: "the timer store is not reachable"},
			fmt.Errorf("check the timer scheduler: %w", err)
	}
}

// acknowledgeRoute is the admin operation that acknowledges a wiped timer
// store; the console names it, since acknowledging is what the operator
// does next.
const acknowledgeRoute = "POST /admin/timers/wipe/acknowledge"

// wipedDetail says what a wiped store means and what to do about it.
func wipedDetail(err error) string {
	what := err.Error()
	var we *timers.WipedError
	if errors.As(err, &we) {
		what = fmt.Sprintf("the marker key %s disappeared (noticed at %s): timers stored before then are lost",
			we.Marker, we.DetectedAt.UTC().Format(time.RFC3339))
	}
	return what + ". Once you have looked, acknowledge it with " + acknowledgeRoute +
		" on each instance that shows it (or restart them); this instance is unready until then."
}
