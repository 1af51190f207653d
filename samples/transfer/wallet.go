package transfer

import (
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
)

// Wallet is a wallet's balance; a frozen wallet takes no deposit. Ops
// counts the deposits and withdrawals applied to it: a command a
// transfer's step makes again after a crash is answered from its key, and
// counted once.
type Wallet struct {
	Balance int  `json:"balance"`
	Frozen  bool `json:"frozen,omitempty"`
	Ops     int  `json:"ops,omitempty"`
}

// Wallets is the wallet entity, one per wallet id.
var Wallets = entities.Define("wallet", func(string) Wallet { return Wallet{} })

var (
	// Deposit adds a positive amount, unless the wallet is frozen (409).
	Deposit = entities.Command(Wallets, "deposit",
		func(ctx *entities.Ctx[Wallet, Wallet], w Wallet, amount int) entities.Effect[Wallet, Wallet] {
			switch {
			case amount <= 0:
				return ctx.Invalid("deposit %d: must be positive", amount)
			case w.Frozen:
				return ctx.Conflict("wallet %s is frozen", ctx.EntityID())
			}
			w.Balance += amount
			w.Ops++
			return ctx.UpdateState(w).ThenReply(w)
		})
	// Withdraw takes a positive amount, at most the balance (409).
	Withdraw = entities.Command(Wallets, "withdraw",
		func(ctx *entities.Ctx[Wallet, Wallet], w Wallet, amount int) entities.Effect[Wallet, Wallet] {
			switch {
			case amount <= 0:
				return ctx.Invalid("withdraw %d: must be positive", amount)
			case amount > w.Balance:
				return ctx.Conflict("withdraw %d from wallet %s: the balance is %d", amount, ctx.EntityID(), w.Balance)
			}
			w.Balance -= amount
			w.Ops++
			return ctx.UpdateState(w).ThenReply(w)
		})
	// Freeze freezes (true) or thaws (false) the wallet.
	Freeze = entities.Command(Wallets, "freeze",
		func(ctx *entities.Ctx[Wallet, Wallet], w Wallet, frozen bool) entities.Effect[Wallet, Wallet] {
			w.Frozen = frozen
			return ctx.UpdateState(w).ThenReply(w)
		})
	// GetWallet reads the wallet.
	GetWallet = entities.Command(Wallets, "get",
		func(ctx *entities.Ctx[Wallet, Wallet], w Wallet, _ components.Done) entities.Effect[Wallet, Wallet] {
			return ctx.Reply(w)
		})
)
