package main

import (
	"net/http"

	"example.com/cartservice/cartapi"
	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/components"
)

// GetStock handles GET /stock/{sku}.
func (e *endpoint) GetStock(w http.ResponseWriter, r *http.Request, sku string) {
	s, err := GetStock.Invoke(r.Context(), e.client, sku, components.Done{})
	replyStock(w, r, s, err)
}

// Restock handles POST /stock/{sku}: adds units at a unit price.
func (e *endpoint) Restock(w http.ResponseWriter, r *http.Request, sku string) {
	var body cartapi.Restock
	if err := api.Decode(r, &body); err != nil {
		api.WriteError(w, r, err)
		return
	}
	s, err := Restock.Invoke(r.Context(), e.client, sku, Restocked{Quantity: body.Quantity, Price: body.Price})
	replyStock(w, r, s, err)
}

// replyStock answers with the stock, or with the problem err stands for.
func replyStock(w http.ResponseWriter, r *http.Request, s Stock, err error) {
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	api.WriteJSON(w, r, http.StatusOK, cartapi.Stock{Sku: s.SKU, Available: s.Available, Price: s.Price})
}

// Deposit handles POST /accounts/{customer}/deposit.
func (e *endpoint) Deposit(w http.ResponseWriter, r *http.Request, customer string) {
	var body cartapi.Deposit
	if err := api.Decode(r, &body); err != nil {
		api.WriteError(w, r, err)
		return
	}
	a, err := Fund.Invoke(r.Context(), e.client, customer, body.Amount)
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	api.WriteJSON(w, r, http.StatusOK, cartapi.Account{Customer: a.Customer, Balance: a.Balance})
}
