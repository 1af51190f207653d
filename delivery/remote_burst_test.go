package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/internal/testkit/remotetest"
)

// TestRemoteBurstPastTellQueue: a producer controller whose window is far
// larger than what the transport queues per peer (TellQueue) sends bursts
// the queue cannot hold. The messages past it are not silently lost: each
// is a remote dead letter, counted, and the protocol makes up for it as
// for a message lost on the link (the consumer controller asks again from
// the first it misses). Every job arrives, in order, once.
func TestRemoteBurstPastTellQueue(t *testing.T) {
	const jobs, window, tellQueue = 1000, 100, 16
	a := remotetest.NewNodeWith(t, "producer-side", remotetest.Config{TellQueue: tellQueue})
	b := remotetest.NewNode(t, "consumer-side", nil)
	col := deliverytest.NewCollector(jobs)
	remoteStream(t, a, b, "burst", delivery.ProducerSettings{ResendFirstInterval: 50 * time.Millisecond},
		delivery.ConsumerSettings{FlowControlWindow: window, ResendIntervalMin: 20 * time.Millisecond, ResendIntervalMax: 200 * time.Millisecond},
		deliverytest.ProducerSpec{Limit: jobs}, col)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := col.Wait(ctx); err != nil {
		t.Fatalf("consumer: %v", err)
	}
	got := col.Jobs()
	for i, j := range got {
		if j != i+1 {
			t.Fatalf("delivery %d is job %d", i+1, j)
		}
	}
	if len(got) != jobs {
		t.Fatalf("%d deliveries of %d jobs", len(got), jobs)
	}
	dead := a.Sys.RemoteDeadLetters()
	if dead == 0 {
		t.Fatalf("no message past the transport's queue of %d with a window of %d: the burst was not tested", tellQueue, window)
	}
	t.Logf("%d jobs in order, once each; %d messages past the queue of %d counted as remote dead letters and sent again", jobs, dead, tellQueue)
}
