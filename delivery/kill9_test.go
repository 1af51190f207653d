package delivery_test

import (
	"testing"

	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
)

func TestKill9DurableRedis(t *testing.T) {
	const jobs = 3000
	r := deliverytest.RunKill9(t, "", jobs)
	checkAtLeastOnce(t, r.Got, jobs, int(r.State.HighestConfirmedSeqNr))
}
