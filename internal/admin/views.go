package admin

import (
	"net/http"
	"time"

	"github.com/trellis-go/trellis/api"
	adminapi "github.com/trellis-go/trellis/api/admin"
)

// ListViews answers GET /admin/views: each view, its generation, and its
// lag on this instance's shards.
func (a *server) ListViews(w http.ResponseWriter, r *http.Request) {
	out := []adminapi.View{}
	if a.views == nil {
		api.WriteJSON(w, r, http.StatusOK, out)
		return
	}
	statuses, err := a.views.Statuses(r.Context())
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	for _, st := range statuses {
		v := adminapi.View{Name: st.Name, Generation: st.Generation, Answering: st.Answering, Shards: st.Shards, LagChanges: int(st.Changes)}
		if !st.Oldest.IsZero() {
			v.LagSeconds = max(time.Since(st.Oldest).Seconds(), 0)
		}
		out = append(out, v)
	}
	api.WriteJSON(w, r, http.StatusOK, out)
}
