package delivery_test

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
)

// Without resending, a lost message is never sent again: the consumer
// controller must renew the demand past it, and an incomplete chunked
// message must not hold the stream. These tests lose and hold back chosen
// messages and chunks, window 2.

// sendChunk tells the consumer controller chunk n of a message: part of
// the job's JSON, first and last as given.
func (h *ccHarness) sendChunk(n delivery.SeqNr, data string, first, last bool) {
	h.cc.Tell(&delivery.SequencedMessage[deliverytest.Job]{ProducerID: "p", SeqNr: n, First: n == 1,
		Chunk:              &delivery.ChunkedMessage{Data: []byte(data), First: first, Last: last, Manifest: delivery.JSONCodec[deliverytest.Job]{}.Manifest()},
		ProducerController: h.pc.Ref, Incarnation: incA})
}

// sendJob tells the consumer controller job n as chunks of numbers from,
// from+1, …: the job's JSON split in the given pieces.
func (h *ccHarness) sendJob(from delivery.SeqNr, pieces ...string) {
	for i, p := range pieces {
		h.sendChunk(from+delivery.SeqNr(i), p, i == 0, i == len(pieces)-1)
	}
}

// lastRequest takes every message the producer controller got, at least
// one, and returns the last, which must be a Request.
func (h *ccHarness) lastRequest(t *testing.T) delivery.Request[deliverytest.Job] {
	t.Helper()
	got := h.pc.Expect(t)
	for m, ok := h.pc.Next(20 * time.Millisecond); ok; m, ok = h.pc.Next(20 * time.Millisecond) {
		got = m
	}
	r, ok := got.(delivery.Request[deliverytest.Job])
	if !ok {
		t.Fatalf("producer controller got %#v last, want a Request", got)
	}
	return r
}

// TestConsumerOnlyFlowControlRenewsDemand: messages beyond the stash (the
// producer controller opened the window past lost ones) are lost like any
// other, and once idle the controller asks for a whole window past all
// that came, via timeout, so that the producer controller opens it past
// what it sent. Before, it asked for less than had come, not via timeout,
// and the producer controller, waiting for demand, never sent again.
func TestConsumerOnlyFlowControlRenewsDemand(t *testing.T) {
	h := newCC(t, delivery.ConsumerSettings{FlowControlWindow: 2, OnlyFlowControl: true, ResendIntervalMin: time.Second, ResendIntervalMax: time.Second})
	h.send(1, true, incA)
	h.expectPC(t, delivery.Request[deliverytest.Job]{ConfirmedSeqNr: 0, RequestUpToSeqNr: 2})
	first := h.expectDelivery(t, 1) // outstanding: what follows waits
	for n := delivery.SeqNr(2); n <= 7; n++ {
		h.send(n, false, incA) // 2 and 3 stashed; 4 to 7 beyond the stash
	}
	first.Confirm()
	h.expectDelivery(t, 2).Confirm()
	h.expectDelivery(t, 3).Confirm()
	h.consumer.ExpectNone(t, 20*time.Millisecond) // 4 to 7 are lost
	h.lastRequest(t)
	h.tick(t, time.Second) // heard messages since the start: not idle
	h.pc.ExpectNone(t, 20*time.Millisecond)
	h.tick(t, time.Second)
	if r := h.lastRequest(t); r != (delivery.Request[deliverytest.Job]{ConfirmedSeqNr: 7, RequestUpToSeqNr: 9, ViaTimeout: true}) {
		t.Fatalf("idle Request %+v, want one that confirms 7 and asks up to 9, via timeout", r)
	}
	h.send(10, false, incA) // sent past 8 and 9, lost too
	h.expectDelivery(t, 10).Confirm()
}

// TestConsumerOnlyFlowControlChunks: a chunked message that lost a chunk
// is dropped as soon as the gap shows, by a later chunk or by the next
// message's first chunk, and never delivered; the messages around it are;
// a message whose last chunk is lost with nothing after it does not hold
// the stream: the idle retry asks past it.
func TestConsumerOnlyFlowControlChunks(t *testing.T) {
	cases := []struct {
		name   string
		lost   func(h *ccHarness) // chunks from 4 on, with one lost
		next   delivery.SeqNr     // where the next whole message starts
		idle   bool               // only an idle retry shows the gap
		upTo   delivery.SeqNr     // the idle Request asks up to this
		before delivery.SeqNr     // the idle Request confirms this
	}{
		{name: "middle chunk lost", lost: func(h *ccHarness) { h.sendChunk(4, `{"n"`, true, false); h.sendChunk(6, `}`, false, true) }, next: 7},
		{name: "first chunk lost", lost: func(h *ccHarness) { h.sendChunk(5, `:4`, false, false); h.sendChunk(6, `}`, false, true) }, next: 7},
		{name: "last chunk lost, next message follows", lost: func(h *ccHarness) { h.sendChunk(4, `{"n"`, true, false); h.sendChunk(5, `:4`, false, false) }, next: 7},
		{name: "last chunk lost, nothing follows", lost: func(h *ccHarness) { h.sendChunk(4, `{"n"`, true, false); h.sendChunk(5, `:4`, false, false) },
			idle: true, before: 5, upTo: 7, next: 8},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newCC(t, delivery.ConsumerSettings{FlowControlWindow: 2, OnlyFlowControl: true, ResendIntervalMin: time.Second, ResendIntervalMax: time.Second})
			h.sendJob(1, `{"n"`, `:3`, `}`)
			h.expectDelivery(t, 3).Confirm()
			tc.lost(h)
			if tc.idle {
				h.lastRequest(t)
				h.tick(t, time.Second) // heard since the start
				h.tick(t, time.Second)
				if r := h.lastRequest(t); r != (delivery.Request[deliverytest.Job]{ConfirmedSeqNr: tc.before, RequestUpToSeqNr: tc.upTo, ViaTimeout: true}) {
					t.Fatalf("idle Request %+v, want one that confirms %d and asks up to %d, via timeout", r, tc.before, tc.upTo)
				}
			}
			n := tc.next
			h.sendJob(n, `{"n"`, `:`+strconv.Itoa(int(n)+2), `}`)
			h.expectDelivery(t, n+2).Confirm()
			h.consumer.ExpectNone(t, 20*time.Millisecond) // job 6 never
			if r := h.lastRequest(t); r.RequestUpToSeqNr < n+3 {
				t.Fatalf("after message %d the demand is %+v, want past it", n+2, r)
			}
		})
	}
}

// TestConsumerOnlyFlowControlWholeJobsOnly: jobs in 1-byte chunks, each
// chunk lost at random (a fixed stream: the random-loss test's link with
// one of its seeds), then one whole job. Without resending the consumer
// controller delivers exactly the jobs none of whose chunks was lost, each
// as soon as its last chunk comes, however many broken ones came before.
func TestConsumerOnlyFlowControlWholeJobsOnly(t *testing.T) {
	cases := []struct {
		name string
		drop float64
		jobs int
	}{
		{name: "drop 0.50", drop: 0.4958439978948622, jobs: 60},
		{name: "drop 0.20", drop: 0.2, jobs: 100},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newCC(t, delivery.ConsumerSettings{FlowControlWindow: 20, OnlyFlowControl: true, ResendIntervalMin: time.Second, ResendIntervalMax: time.Second})
			rng := rand.New(rand.NewPCG(3459146754235917482, 1))
			seqNr, whole := delivery.SeqNr(0), 0
			for n := 1; n <= tc.jobs+1; n++ {
				data, _ := json.Marshal(deliverytest.Job{N: n})
				lost := false
				for i := range data {
					seqNr++
					if n <= tc.jobs && rng.Float64() < tc.drop { // the last job is whole
						lost = true
						continue
					}
					h.sendChunk(seqNr, string(data[i]), i == 0, i == len(data)-1)
				}
				if lost {
					continue
				}
				whole++
				d := h.consumer.Expect(t)
				if d.Message.N != n || d.SeqNr != seqNr {
					t.Fatalf("delivered job %d (seqNr %d), want job %d, whole on arrival, with seqNr %d", d.Message.N, d.SeqNr, n, seqNr)
				}
				d.Confirm()
			}
			h.consumer.ExpectNone(t, 20*time.Millisecond)
			t.Logf("%d of %d jobs whole", whole, tc.jobs+1)
		})
	}
}
