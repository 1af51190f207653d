// Command server is the transfer sample as its own service, written as
// a user writes one: the wallets and the transfer workflow
// (samples/transfer) on trellis.Run, configured by Trellis's environment
// and flags (run it with -h), and TRANSFER_APPROVAL_WAIT (a duration such
// as 24h, the default: how long a transfer waits for an approval). Its
// tests kill -9 instances of it while transfers run.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/samples/transfer"
)

func main() {
	if s := os.Getenv("TRANSFER_APPROVAL_WAIT"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			fmt.Fprintf(os.Stderr, "TRANSFER_APPROVAL_WAIT=%q: want a positive duration, such as 24h\n", s)
			os.Exit(2)
		}
		transfer.ApprovalWait = d
	}
	app := &transfer.App{}
	os.Exit(trellis.Run(context.Background(), app.Setup))
}
