package counter

import (
	"net/http"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/samples/contract"
)

// Endpoint serves the counter routes of the contract (GetCounter,
// IncreaseCounter and DeleteCounter of contract.ServerInterface) by invoking
// the counter entity through the component client. Start the entity on the
// same client first.
type Endpoint struct {
	client *components.Client
}

// NewEndpoint makes the endpoint over client.
func NewEndpoint(client *components.Client) *Endpoint { return &Endpoint{client: client} }

// IncreaseCounter handles POST /counters/{id}/increase: body {"by": N}
// with N from 1 to 1,000,000; replies with the new counter. With an
// Idempotency-Key, the increase happens once per key (the key reaches
// the entity in the request's context).
func (e *Endpoint) IncreaseCounter(w http.ResponseWriter, r *http.Request, id contract.CounterID) {
	if !checkID(w, r, id) {
		return
	}
	var body contract.CounterIncrease
	if err := api.Decode(r, &body); err != nil {
		api.WriteError(w, r, err)
		return
	}
	c, err := Increase.Invoke(r.Context(), e.client, id, body.By)
	reply(w, r, c, err)
}

// IdempotentRoutes are the counter routes that take an Idempotency-Key
// (see api.Idempotency): an increase with a key is applied once per key.
var IdempotentRoutes = []string{"POST /counters/{id}/increase"}

// GetCounter handles GET /counters/{id}.
func (e *Endpoint) GetCounter(w http.ResponseWriter, r *http.Request, id contract.CounterID) {
	if !checkID(w, r, id) {
		return
	}
	c, err := Get.Invoke(r.Context(), e.client, id, components.Done{})
	reply(w, r, c, err)
}

// DeleteCounter handles DELETE /counters/{id}: replies with the counter's
// last state.
func (e *Endpoint) DeleteCounter(w http.ResponseWriter, r *http.Request, id contract.CounterID) {
	if !checkID(w, r, id) {
		return
	}
	c, err := Delete.Invoke(r.Context(), e.client, id, components.Done{})
	reply(w, r, c, err)
}

// reply answers with the counter, or with the problem err stands for (the
// entity's error(message) is a 400 with that message).
func reply(w http.ResponseWriter, r *http.Request, c Counter, err error) {
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	api.WriteJSON(w, r, http.StatusOK, contract.Counter{Id: c.ID, Value: c.Value})
}

// MaxIDLen is the longest counter id.
const MaxIDLen = 64

// ValidID reports whether id is a counter id as the contract's CounterID
// parameter defines it: ^[A-Za-z0-9_-]{1,64}$.
func ValidID(id string) bool {
	if id == "" || len(id) > MaxIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// checkID answers 400 naming the id when it is not a valid counter id.
func checkID(w http.ResponseWriter, r *http.Request, id string) bool {
	if ValidID(id) {
		return true
	}
	api.WriteError(w, r, api.InvalidField("id", "must be 1 to 64 letters, digits, '_' or '-'"))
	return false
}
