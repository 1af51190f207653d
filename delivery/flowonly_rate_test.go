package delivery

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
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
	base := lossCase{messages: 150, toCC: [2]float64{0.2, 0.2}, toPC: [2]float64{0.2, 0.2}, lag: 2 * time.Millisecond,
		onlyFlow: true, window: 2, resend: [2]time.Duration{2 * time.Millisecond, 40 * time.Millisecond}}
	chunked := base
	chunked.chunk = 3
	var plain, chunks []float64
	for round := range 3 {
		for _, c := range []lossCase{base, chunked} {
			seqs, msgs, err := flowOnlyRate(c, uint64(round+1))
			if err != nil {
				t.Fatalf("chunk %d, round %d: %v", c.chunk, round, err)
			}
			t.Logf("chunk %d: %.0f seqNrs/s, %.0f messages/s", c.chunk, seqs, msgs)
			if c.chunk == 0 {
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
func flowOnlyRate(c lossCase, seed uint64) (seqs, msgs float64, err error) {
	r := newLossRun(c, seed)
	defer r.close(&err)
	pc, err := SpawnProducerController[job](r.sys, "pc", "p", r.ps)
	if err != nil {
		return 0, 0, err
	}
	cc, err := SpawnConsumerController[job](r.sys, "cc", r.cs)
	if err != nil {
		return 0, 0, err
	}
	toCC, toPC := r.faults()
	link := newFaultLink[job](r.rt, r.sys, "link", pc, cc, toCC, toPC, seed)
	col := newCollector(c.messages)
	spawnConsumer(r.rt, r.sys, "consumer", cc, consumerSpec{}, col)
	start := time.Now()
	spawnProducer(r.rt, r.sys, "producer", pc, producerSpec{})
	cc.Tell(RegisterToProducerController[job]{ProducerController: link.toPC})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := col.wait(ctx); err != nil {
		return 0, 0, fmt.Errorf("%w (link: %s)", err, link.describe())
	}
	elapsed := time.Since(start).Seconds()
	got := col.deliveries()
	return float64(got[len(got)-1].SeqNr) / elapsed, float64(len(got)) / elapsed, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
