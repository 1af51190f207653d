package ledger

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
)

// Setup starts the entity on the host and mounts its routes.
func Setup(h *trellis.Host, r chi.Router) error {
	if _, err := Accounts.Start(h.Entities()); err != nil {
		return err
	}
	journal, ok := h.Store.(entities.JournalStore)
	if !ok {
		return errors.New("ledger: the store keeps no journals")
	}
	e := &endpoint{client: h.Client, journal: journal}
	r.Post("/ledger/{id}/deposit", e.move(Deposit))
	r.Post("/ledger/{id}/withdraw", e.move(Withdraw))
	r.Get("/ledger/{id}", e.get)
	r.Get("/ledger/{id}/history", e.history)
	r.Delete("/ledger/{id}", e.close)
	return nil
}

type endpoint struct {
	client  *components.Client
	journal entities.JournalStore
}

// Movement is the body of a deposit or a withdrawal.
type Movement struct {
	Amount int64 `json:"amount"`
}

func (e *endpoint) move(cmd components.EntityMethod[int64, Account]) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var m Movement
		if err := api.Decode(r, &m); err != nil {
			api.WriteError(w, r, err)
			return
		}
		a, err := cmd.Invoke(r.Context(), e.client, chi.URLParam(r, "id"), m.Amount)
		reply(w, r, a, err)
	}
}

func (e *endpoint) get(w http.ResponseWriter, r *http.Request) {
	a, err := Get.Invoke(r.Context(), e.client, chi.URLParam(r, "id"), components.Done{})
	reply(w, r, a, err)
}

func (e *endpoint) close(w http.ResponseWriter, r *http.Request) {
	a, err := Close.Invoke(r.Context(), e.client, chi.URLParam(r, "id"), components.Done{})
	reply(w, r, a, err)
}

// Entry is one event of an account's history.
type Entry struct {
	Seq    uint64 `json:"seq"`
	Kind   string `json:"kind"`
	Amount int64  `json:"amount"`
}

// maxHistory bounds a history page.
const maxHistory = 100

// history answers GET /ledger/{id}/history?after=N: up to 100 events
// after event N, read from the journal (the events themselves, not a
// state).
func (e *endpoint) history(w http.ResponseWriter, r *http.Request) {
	after := uint64(0)
	if text := r.URL.Query().Get("after"); text != "" {
		n, err := strconv.ParseUint(text, 10, 64)
		if err != nil {
			api.WriteError(w, r, api.InvalidField("after", "must be an event number"))
			return
		}
		after = n
	}
	events, err := e.journal.Events(r.Context(), Accounts.ComponentID(), chi.URLParam(r, "id"), after, maxHistory)
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	out := make([]Entry, 0, len(events))
	for _, je := range events {
		ev, err := Accounts.DecodeEvent(je.Name, je.Data)
		if err != nil {
			api.WriteError(w, r, err)
			return
		}
		entry := Entry{Seq: je.Seq, Kind: je.Name}
		switch ev := ev.(type) {
		case Deposited:
			entry.Amount = ev.Amount
		case Withdrawn:
			entry.Amount = ev.Amount
		}
		out = append(out, entry)
	}
	api.WriteJSON(w, r, http.StatusOK, out)
}

func reply(w http.ResponseWriter, r *http.Request, a Account, err error) {
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	api.WriteJSON(w, r, http.StatusOK, a)
}
