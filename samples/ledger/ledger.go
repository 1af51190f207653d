// Package ledger is a small event-sourced entity: an account whose
// balance is the fold of its journal of deposits and withdrawals, so that
// its history ("how did it get here") is the journal itself. Setup
// mounts it at /ledger/{id} by hand (no contract): POST deposit and
// withdraw with {"amount": N}, GET the account, GET its history, DELETE
// to close it. docs/eventsourced.md walks through it.
package ledger

import (
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/eventsourced"
)

// Account is the state: the balance and how many movements made it.
type Account struct {
	Balance   int64 `json:"balance"`
	Movements int   `json:"movements"`
}

// Deposited is the event of a deposit, stored as "deposited".
type Deposited struct {
	Amount int64 `json:"amount"`
}

// Withdrawn is the event of a withdrawal, stored as "withdrawn".
type Withdrawn struct {
	Amount int64 `json:"amount"`
}

// MaxAmount bounds one movement.
const MaxAmount = 1_000_000

// Accounts is the entity, component id "ledger", with a snapshot every
// 50 events.
var Accounts = eventsourced.Define("ledger", func(string) Account { return Account{} }, apply,
	eventsourced.SnapshotEvery(50))

func init() {
	eventsourced.Event[Deposited](Accounts, "deposited")
	eventsourced.Event[Withdrawn](Accounts, "withdrawn")
}

// apply is the account after an event.
func apply(a Account, e any) Account {
	switch e := e.(type) {
	case Deposited:
		a.Balance += e.Amount
	case Withdrawn:
		a.Balance -= e.Amount
	}
	a.Movements++
	return a
}

// Deposit persists a Deposited event and replies with the account after
// it; an amount outside 1..MaxAmount is refused (422).
var Deposit = eventsourced.Command(Accounts, "deposit",
	func(ctx *eventsourced.Ctx[Account, Account], a Account, amount int64) eventsourced.Effect[Account, Account] {
		if amount < 1 || amount > MaxAmount {
			return ctx.Invalid("amount %d: must be from 1 to %d", amount, MaxAmount)
		}
		return ctx.Persist(Deposited{Amount: amount}).ThenReply(func(a Account) Account { return a })
	})

// Withdraw persists a Withdrawn event; more than the balance is a
// conflict (409).
var Withdraw = eventsourced.Command(Accounts, "withdraw",
	func(ctx *eventsourced.Ctx[Account, Account], a Account, amount int64) eventsourced.Effect[Account, Account] {
		switch {
		case amount < 1 || amount > MaxAmount:
			return ctx.Invalid("amount %d: must be from 1 to %d", amount, MaxAmount)
		case amount > a.Balance:
			return ctx.Conflict("withdraw %d: the balance is %d", amount, a.Balance)
		}
		return ctx.Persist(Withdrawn{Amount: amount}).ThenReply(func(a Account) Account { return a })
	})

// Get replies with the account.
var Get = eventsourced.Command(Accounts, "get",
	func(ctx *eventsourced.Ctx[Account, Account], a Account, _ components.Done) eventsourced.Effect[Account, Account] {
		return ctx.Reply(a)
	})

// Close withdraws what is left and deletes the account: its journal stays,
// and later commands are refused (404).
var Close = eventsourced.Command(Accounts, "close",
	func(ctx *eventsourced.Ctx[Account, Account], a Account, _ components.Done) eventsourced.Effect[Account, Account] {
		if a.Balance == 0 {
			return ctx.DeleteEntity().ThenReply(a)
		}
		return ctx.DeleteEntity(Withdrawn{Amount: a.Balance}).ThenReply(Account{Movements: a.Movements + 1})
	})
