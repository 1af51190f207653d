package transfer

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/components"
)

// Routes adds the sample's HTTP routes to r, on the component client:
//
//	POST /transfers/{id}          body {"from", "to", "amount"}: starts the transfer (201)
//	GET  /transfers/{id}          the transfer and its outcome
//	POST /transfers/{id}/approve  lets a transfer that waits for an approval go on (204)
//	POST /transfers/{id}/reject   ends it (204)
//	POST /wallets/{id}/deposit    body {"amount"}: puts money in a wallet
//	GET  /wallets/{id}            the wallet
//
// A bad request is answered as the workflow's command refuses it: 422 for
// an amount that is not positive or a transfer to its own wallet, 409 for
// a transfer started twice or one that waits for no approval, 404 for a
// transfer that does not exist.
func Routes(r chi.Router, client *components.Client) {
	r.Post("/transfers/{id}", func(w http.ResponseWriter, r *http.Request) {
		var req Transfer
		if err := api.Decode(r, &req); err != nil {
			api.WriteError(w, r, err)
			return
		}
		req.Outcome, req.Undo, req.Undone = "", nil, nil
		t, err := Begin.Invoke(r.Context(), client, chi.URLParam(r, "id"), req)
		if err != nil {
			api.WriteError(w, r, err)
			return
		}
		api.WriteJSON(w, r, http.StatusCreated, t)
	})
	r.Get("/transfers/{id}", func(w http.ResponseWriter, r *http.Request) {
		t, err := GetTransfer.Invoke(r.Context(), client, chi.URLParam(r, "id"), components.Done{})
		if err != nil {
			api.WriteError(w, r, err)
			return
		}
		api.WriteJSON(w, r, http.StatusOK, t)
	})
	r.Post("/wallets/{id}/deposit", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Amount int `json:"amount"`
		}
		if err := api.Decode(r, &req); err != nil {
			api.WriteError(w, r, err)
			return
		}
		wallet, err := Deposit.Invoke(r.Context(), client, chi.URLParam(r, "id"), req.Amount)
		if err != nil {
			api.WriteError(w, r, err)
			return
		}
		api.WriteJSON(w, r, http.StatusOK, wallet)
	})
	r.Get("/wallets/{id}", func(w http.ResponseWriter, r *http.Request) {
		wallet, err := GetWallet.Invoke(r.Context(), client, chi.URLParam(r, "id"), components.Done{})
		if err != nil {
			api.WriteError(w, r, err)
			return
		}
		api.WriteJSON(w, r, http.StatusOK, wallet)
	})
	for path, cmd := range map[string]components.EntityMethod[components.Done, components.Done]{
		"/transfers/{id}/approve": Approve, "/transfers/{id}/reject": Reject,
	} {
		r.Post(path, func(w http.ResponseWriter, r *http.Request) {
			if _, err := cmd.Invoke(r.Context(), client, chi.URLParam(r, "id"), components.Done{}); err != nil {
				api.WriteError(w, r, err)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		})
	}
}
