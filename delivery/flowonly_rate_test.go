package delivery_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
)

// TestFlowOnlyChunkedRate: without resending, at window 2 and 20 % loss
// each way, a chunked stream moves at the link's pace: its sequence
// numbers (chunks) per second are at least half the unchunked stream's
// sequence numbers per second through the same link. Runs take turns, three each;
// the medians are compared. (Each message is 3 to 4 chunks, so whole
// messages per second are lower by about that factor and by the chance
// that one of its chunks is lost.)
func TestFlowOnlyChunkedRate(t *testing.T) {
	if testing.Short() {
		t.Skip("measures two streams for a few seconds")
	}
	base := deliverytest.LossCase{Messages: 150, ToCC: [2]float64{0.2, 0.2}, ToPC: [2]float64{0.2, 0.2}, Lag: 2 * time.Millisecond,
		OnlyFlow: true, Window: 2, Resend: [2]time.Duration{2 * time.Millisecond, 40 * time.Millisecond}}
	chunked := base
	chunked.Chunk = 3
	var plain, chunks []float64
	for round := range 3 {
		for _, c := range []deliverytest.LossCase{base, chunked} {
			seqs, msgs, err := flowOnlyRate(c, uint64(round+1))
			if err != nil {
				t.Fatalf("chunk %d, round %d: %v", c.Chunk, round, err)
			}
			t.Logf("chunk %d: %.0f seqNrs/s, %.0f messages/s", c.Chunk, seqs, msgs)
			if c.Chunk == 0 {
				plain = append(plain, seqs)
			} else {
				chunks = append(chunks, seqs)
			}
		}
	}
	p, c := median(plain), median(chunks)
	t.Logf("median: unchunked %.0f seqNrs/s, chunked %.0f seqNrs/s (%.2fx)", p, c, c/p)
	if c < p/2 {
		t.Errorf("chunked stream %.0f seqNrs/s, under half the unchunked %.0f", c, p)
	}
}

// flowOnlyRate runs c once, point to point, and returns the sequence
// numbers and the messages per second that reached the consumer.
func flowOnlyRate(c deliverytest.LossCase, seed uint64) (seqs, msgs float64, err error) {
	r := deliverytest.NewLossRun(c, seed)
	defer r.Close(&err)
	pc, err := delivery.SpawnProducerController[deliverytest.Job](r.Sys, "pc", "p", r.Producer)
	if err != nil {
		return 0, 0, err
	}
	cc, err := delivery.SpawnConsumerController[deliverytest.Job](r.Sys, "cc", r.Consumer)
	if err != nil {
		return 0, 0, err
	}
	toCC, toPC := r.Faults()
	link := deliverytest.NewFaultLink[deliverytest.Job](r.TB, r.Sys, "link", pc, cc, toCC, toPC, seed)
	col := deliverytest.NewCollector(c.Messages)
	deliverytest.SpawnConsumer(r.TB, r.Sys, "consumer", cc, deliverytest.ConsumerSpec{}, col)
	start := time.Now()
	deliverytest.SpawnProducer(r.TB, r.Sys, "producer", pc, deliverytest.ProducerSpec{})
	cc.Tell(delivery.RegisterToProducerController[deliverytest.Job]{ProducerController: link.ToPC})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := col.Wait(ctx); err != nil {
		return 0, 0, fmt.Errorf("%w (link: %s)", err, link.Describe())
	}
	elapsed := time.Since(start).Seconds()
	got := col.Deliveries()
	return float64(got[len(got)-1].SeqNr) / elapsed, float64(len(got)) / elapsed, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
