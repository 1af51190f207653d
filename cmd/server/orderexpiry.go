package main

import (
	"fmt"
	"time"

	"github.com/trellis-go/trellis"
)

// EnvOrderExpiry is the variable that sets how long a placed order waits
// for its confirmation before the order sample cancels it.
const EnvOrderExpiry = "TRELLIS_ORDER_EXPIRY"

// defaultOrderExpiry is the reference sample's delay.
const defaultOrderExpiry = 10 * time.Second

// orderExpiryFromEnv reads TRELLIS_ORDER_EXPIRY, a Go duration such as
// "10s" or "1m30s" (default 10 s). A value that does not parse, or is not
// positive, is a *trellis.ConfigError naming the variable, so the server
// refuses to start rather than run orders that expire at once or never.
func orderExpiryFromEnv(getenv func(string) string) (time.Duration, error) {
	v := getenv(EnvOrderExpiry)
	if v == "" {
		return defaultOrderExpiry, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, &trellis.ConfigError{Var: EnvOrderExpiry, Reason: fmt.Sprintf("%q is not a duration (want e.g. 10s, 2m or 1h30m)", v)}
	}
	if d <= 0 {
		return 0, &trellis.ConfigError{Var: EnvOrderExpiry, Reason: fmt.Sprintf("%q must be positive", v)}
	}
	return d, nil
}

// orderExpiryUsage is what -h says about the variable.
func orderExpiryUsage() string {
	return fmt.Sprintf("\nEnvironment of the samples:\n  %s\n    \thow long a placed order waits for its confirmation before it is cancelled, a Go duration (default %v)\n",
		EnvOrderExpiry, defaultOrderExpiry)
}
