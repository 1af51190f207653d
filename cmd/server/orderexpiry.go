package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/trellis-go/trellis"
)

// EnvOrderExpiry is the variable that sets how long a placed order waits
// for its confirmation before the order sample cancels it.
const EnvOrderExpiry = "TRELLIS_ORDER_EXPIRY"

// defaultOrderExpiry is the reference sample's delay.
const defaultOrderExpiry = 10 * time.Second

// flagOrderExpiry is the flag that overrides TRELLIS_ORDER_EXPIRY, as
// Trellis's flags override its variables.
const flagOrderExpiry = "order-expiry"

// orderExpiryFlag defines -order-expiry on fs, defaulting to
// TRELLIS_ORDER_EXPIRY (read with getenv) and storing its text in v, for
// parseOrderExpiry to check once the flags are parsed.
func orderExpiryFlag(getenv func(string) string, v *string) func(fs *flag.FlagSet) {
	return func(fs *flag.FlagSet) {
		fs.StringVar(v, flagOrderExpiry, getenv(EnvOrderExpiry), fmt.Sprintf(
			"how long a placed order waits for its confirmation before it is cancelled, a Go duration; empty: %v (env %s)",
			defaultOrderExpiry, EnvOrderExpiry))
	}
}

// parseOrderExpiry reads the order expiry, a Go duration such as "10s" or
// "1m30s" ("" is 10 s). A value that does not parse, or is not positive,
// is a *trellis.ConfigError naming the variable and the flag, so the
// server refuses to start rather than run orders that expire at once or
// never.
func parseOrderExpiry(v string) (time.Duration, error) {
	if v == "" {
		return defaultOrderExpiry, nil
	}
	bad := func(why string) error {
		return &trellis.ConfigError{Var: EnvOrderExpiry, Flag: "-" + flagOrderExpiry, Reason: fmt.Sprintf("%q %s", v, why)}
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, bad("is not a duration (want e.g. 10s, 2m or 1h30m)")
	}
	if d <= 0 {
		return 0, bad("must be positive")
	}
	return d, nil
}
