// Command cartservice serves shopping carts on Trellis.
package main

import (
	"context"
	"flag"
	"os"
	"time"

	"github.com/go-chi/chi/v5"

	"example.com/cartservice/cartapi"
	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/api"
)

func main() {
	var idle time.Duration
	os.Exit(trellis.Run(context.Background(), setup(&idle),
		trellis.WithContract(cartapi.Spec),
		trellis.WithFlags(func(fs *flag.FlagSet) {
			fs.DurationVar(&idle, "cart-idle", 30*time.Minute, "how long a cart may stay idle before it is abandoned")
		})))
}

// setup starts the components — the carts and their idle timers, the
// stock, the accounts, the checkout workflow and the orders view — and
// mounts the contract's routes. idle is read when setup runs: after the
// flags are parsed.
func setup(idle *time.Duration) trellis.Setup {
	return func(h *trellis.Host, r chi.Router) error {
		if *idle <= 0 {
			return &trellis.ConfigError{Var: "-cart-idle", Reason: "must be positive"} // exit code 2
		}
		if _, err := Carts.Start(h.Entities()); err != nil {
			return err
		}
		if _, err := Idle.Start(h.Client); err != nil {
			return err
		}
		if _, err := Stocks.Start(h.Entities()); err != nil {
			return err
		}
		if _, err := Accounts.Start(h.Entities()); err != nil {
			return err
		}
		if _, err := Checkouts.Start(h.Workflows()); err != nil {
			return err
		}
		if err := Orders.Start(h.Views()); err != nil {
			return err
		}
		e := &endpoint{client: h.Client, timers: h.Timers, views: h.Views(), now: h.Clock.Now, idle: *idle}
		cartapi.HandlerWithOptions(e,
			cartapi.ChiServerOptions{BaseRouter: r, ErrorHandlerFunc: api.WriteParamError})
		return nil
	}
}
