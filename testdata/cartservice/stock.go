package main

import (
	"maps"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/eventsourced"
)

// Stock is the stock of one SKU: the units not reserved, the unit price,
// and what each order reserved. It is event-sourced: its journal is the
// history of restocks, reservations and releases.
type Stock struct {
	SKU       string         `json:"sku"`
	Available int            `json:"available"`
	Price     int            `json:"price"`              // cents a unit
	Reserved  map[string]int `json:"reserved,omitempty"` // units by order id
}

// The events of a SKU's stock, each under its stable name in the journal.
type (
	// Restocked adds units, and sets the unit price.
	Restocked struct {
		Quantity int `json:"quantity"`
		Price    int `json:"price"`
	}
	// Reserved sets units aside for an order.
	Reserved struct {
		Order    string `json:"order"`
		Quantity int    `json:"quantity"`
	}
	// Released gives an order's units back.
	Released struct {
		Order    string `json:"order"`
		Quantity int    `json:"quantity"`
	}
)

// Stocks is the stock entity, one per SKU.
var Stocks = eventsourced.Define("stock", func(sku string) Stock { return Stock{SKU: sku} }, applyStock)

func init() {
	eventsourced.Event[Restocked](Stocks, "restocked")
	eventsourced.Event[Reserved](Stocks, "reserved")
	eventsourced.Event[Released](Stocks, "released")
}

// applyStock is the stock after event e.
func applyStock(s Stock, e any) Stock {
	s.Reserved = maps.Clone(s.Reserved) // apply builds a new state
	switch e := e.(type) {
	case Restocked:
		s.Available += e.Quantity
		s.Price = e.Price
	case Reserved:
		if s.Reserved == nil {
			s.Reserved = map[string]int{}
		}
		s.Available -= e.Quantity
		s.Reserved[e.Order] = e.Quantity
	case Released:
		s.Available += e.Quantity
		delete(s.Reserved, e.Order)
	}
	return s
}

// Reservation is what Reserve sets aside.
type Reservation struct {
	Order    string `json:"order"`
	Quantity int    `json:"quantity"`
}

var (
	// Restock adds units at a unit price.
	Restock = eventsourced.Command(Stocks, "restock",
		func(ctx *eventsourced.Ctx[Stock, Stock], _ Stock, r Restocked) eventsourced.Effect[Stock, Stock] {
			if r.Quantity <= 0 || r.Price <= 0 {
				return ctx.Invalid("restock %d at %d: both must be positive", r.Quantity, r.Price)
			}
			return ctx.Persist(r).ThenReply(func(s Stock) Stock { return s })
		})
	// Reserve sets units aside for an order and replies with the unit
	// price; more than are available is refused (409). An order reserves
	// once: asked again, it is answered with the price and nothing more.
	Reserve = eventsourced.Command(Stocks, "reserve",
		func(ctx *eventsourced.Ctx[Stock, int], s Stock, r Reservation) eventsourced.Effect[Stock, int] {
			switch {
			case r.Quantity <= 0:
				return ctx.Invalid("reserve %d: must be positive", r.Quantity)
			case s.Reserved[r.Order] > 0:
				return ctx.Reply(s.Price)
			case r.Quantity > s.Available:
				return ctx.Conflict("%d of %s wanted, %d available", r.Quantity, s.SKU, s.Available)
			}
			return ctx.Persist(Reserved(r)).ThenReply(func(s Stock) int { return s.Price })
		})
	// Release gives back what an order reserved, if anything.
	Release = eventsourced.Command(Stocks, "release",
		func(ctx *eventsourced.Ctx[Stock, components.Done], s Stock, order string) eventsourced.Effect[Stock, components.Done] {
			n := s.Reserved[order]
			if n == 0 {
				return ctx.Reply(components.Done{})
			}
			return ctx.Persist(Released{Order: order, Quantity: n}).ThenReply(func(Stock) components.Done { return components.Done{} })
		})
	// GetStock reads the stock.
	GetStock = eventsourced.Command(Stocks, "get",
		func(ctx *eventsourced.Ctx[Stock, Stock], s Stock, _ components.Done) eventsourced.Effect[Stock, Stock] {
			return ctx.Reply(s)
		})
)
