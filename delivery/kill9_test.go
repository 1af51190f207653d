package delivery_test

import (
	"testing"

	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

func TestKill9DurableRedis(t *testing.T) {
	testenv.Long(t)
	const jobs = 3000
	r := deliverytest.RunKill9(t, "", jobs)
	checkAtLeastOnce(t, r.Got, jobs, int(r.State.HighestConfirmedSeqNr))
}
