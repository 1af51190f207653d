package main

import (
	"maps"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
)

// Account is a customer's account, which orders are paid from.
type Account struct {
	Customer string         `json:"customer"`
	Balance  int            `json:"balance"`           // cents
	Charged  map[string]int `json:"charged,omitempty"` // cents by order id
}

// Payment is what Charge takes from an account.
type Payment struct {
	Order  string `json:"order"`
	Amount int    `json:"amount"`
}

// Accounts is the account entity, one per customer.
var Accounts = entities.Define("account", func(customer string) Account { return Account{Customer: customer} })

var (
	// Fund puts a positive amount in the account.
	Fund = entities.Command(Accounts, "fund",
		func(ctx *entities.Ctx[Account, Account], a Account, amount int) entities.Effect[Account, Account] {
			if amount <= 0 {
				return ctx.Invalid("fund %d: must be positive", amount)
			}
			a.Balance += amount
			return ctx.UpdateState(a).ThenReply(a)
		})
	// Charge takes an order's amount, at most the balance (409); an order
	// is charged once.
	Charge = entities.Command(Accounts, "charge",
		func(ctx *entities.Ctx[Account, Account], a Account, p Payment) entities.Effect[Account, Account] {
			switch {
			case a.Charged[p.Order] > 0:
				return ctx.Reply(a)
			case p.Amount <= 0:
				return ctx.Invalid("charge %d: must be positive", p.Amount)
			case p.Amount > a.Balance:
				return ctx.Conflict("charge %d to %s: the balance is %d", p.Amount, a.Customer, a.Balance)
			}
			a.Charged = maps.Clone(a.Charged)
			if a.Charged == nil {
				a.Charged = map[string]int{}
			}
			a.Balance -= p.Amount
			a.Charged[p.Order] = p.Amount
			return ctx.UpdateState(a).ThenReply(a)
		})
	// GetAccount reads the account.
	GetAccount = entities.Command(Accounts, "get",
		func(ctx *entities.Ctx[Account, Account], a Account, _ components.Done) entities.Effect[Account, Account] {
			return ctx.Reply(a)
		})
)
