package workpulling_test

import (
	"testing"

	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// The kill -9 test of work pulling: as for point to point
// (delivery/kill9_test.go, and deliverytest.Kill9PatternChild for the child
// process), with the work-pulling producer controller's durable queue in
// Redis. The producer asks for every job and records in
// Redis the last one stored (the ask's reply); a restarted producer goes on
// after it. Every consumer appends the jobs it is delivered to a list, and
// adds them to a set, before it confirms them; the child is done when the
// set holds every job.

// TestKill9DurableRedisWorkPulling: three workers; every job arrives, none
// twice before the kill.
func TestKill9DurableRedisWorkPulling(t *testing.T) {
	testenv.Long(t)
	const jobs = 2000
	r := deliverytest.RunKill9(t, "workpulling", jobs)
	seen := make(map[int]int)
	for i, j := range r.Got {
		if seen[j]++; seen[j] > 1 && i < r.AtKill {
			t.Fatalf("job %d delivered twice before the kill", j)
		}
	}
	for j := 1; j <= jobs; j++ {
		if seen[j] == 0 {
			t.Fatalf("job %d lost", j)
		}
	}
	t.Logf("%d deliveries of %d jobs", len(r.Got), jobs)
}
