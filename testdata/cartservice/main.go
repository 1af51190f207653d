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

// setup starts the components and mounts the carts' routes. idle is read
// when setup runs: after the flags are parsed.
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
		cartapi.HandlerWithOptions(&endpoint{client: h.Client, timers: h.Timers, idle: *idle},
			cartapi.ChiServerOptions{BaseRouter: r, ErrorHandlerFunc: api.WriteParamError})
		return nil
	}
}
