// Command server is the transfer sample as its own service, written as
// a user writes one: the wallets and the transfer workflow
// (samples/transfer) on trellis.Run, configured by Trellis's environment
// and flags (run it with -h). Its tests kill -9 instances of it while
// transfers run.
package main

import (
	"context"
	"os"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/samples/transfer"
)

func main() {
	app := &transfer.App{}
	os.Exit(trellis.Run(context.Background(), app.Setup))
}
