package admin

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/trellis-go/trellis/api"
	adminapi "github.com/trellis-go/trellis/api/admin"
	"github.com/trellis-go/trellis/timers"
)

// listQuery turns the query parameters of GET /admin/timers into a
// timers.ListQuery. It checks here what the HTTP contract says and the
// scheduler cannot tell apart: an explicit limit=0 is invalid (the
// scheduler reads 0 as "the default"), and upcoming must parse as a
// positive Go duration. Each refusal is a 400 naming the parameter.
func listQuery(p adminapi.ListTimersParams) (timers.ListQuery, error) {
	q := timers.ListQuery{NameContains: p.Name, Failing: p.Failing, Cursor: p.Cursor,
		ComponentID: p.ComponentId, Method: p.Method, EntityID: p.EntityId, Recurring: p.Recurring}
	if p.Limit != nil {
		if *p.Limit < 1 || *p.Limit > timers.MaxListLimit {
			return q, api.InvalidField("limit", fmt.Sprintf("must be from 1 to %d", timers.MaxListLimit))
		}
		q.Limit = *p.Limit
	}
	if p.Upcoming != "" {
		d, err := time.ParseDuration(p.Upcoming)
		if err != nil {
			return q, api.InvalidField("upcoming", "must be a Go duration such as 90s, 15m or 2h")
		}
		if d <= 0 {
			return q, api.InvalidField("upcoming", "must be a positive duration")
		}
		q.Upcoming = d
	}
	return q, nil
}

// listError answers a failed List. The query's limit and upcoming were
// checked by listQuery, so an ErrInvalidQuery from the scheduler is about
// the cursor; anything else goes through api.WriteError (a timeout is a
// 504, a store failure a 500 with a correlation id).
func listError(w http.ResponseWriter, r *http.Request, q timers.ListQuery, err error) {
	if errors.Is(err, timers.ErrInvalidQuery) {
		if q.Cursor != "" {
			err = &api.RequestError{
				Status: http.StatusBadRequest,
				Detail: "the request is invalid",
				Fields: []api.FieldError{{Field: "cursor", Message: "is not a cursor this API returned; start again without one"}},
				Err:    err,
			}
		} else {
			err = &api.RequestError{Status: http.StatusBadRequest, Detail: err.Error(), Err: err}
		}
	}
	api.WriteError(w, r, err)
}
