// Package queuetest owns the contract test of durable producer queues: one
// suite that every durable.Queue implementation (memory, Redis) must pass.
package queuetest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/trellis-go/trellis/delivery/durable"
)

// Payload is the message type of the suite.
type Payload struct {
	Text string `json:"text"`
	N    int    `json:"n"`
}

// Run runs the contract against fresh queues from newQueue; each call must
// return an empty queue, and reopen must return the same queue's data
// through a new value (as a restarted process would see it).
func Run(t *testing.T, newQueue func(t *testing.T) (q durable.Queue[Payload], reopen func() durable.Queue[Payload])) {
	ctx := context.Background()
	at := time.UnixMilli(1_700_000_000_123)
	sent := func(n durable.SeqNr, qual string) durable.MessageSent[Payload] {
		return durable.MessageSent[Payload]{SeqNr: n, Message: Payload{Text: "m", N: int(n)}, Qualifier: qual, Timestamp: at, Ack: n%2 == 0}
	}
	store := func(t *testing.T, q durable.Queue[Payload], ms ...durable.MessageSent[Payload]) {
		t.Helper()
		for _, m := range ms {
			if err := q.StoreMessageSent(ctx, m); err != nil {
				t.Fatalf("store %d: %v", m.SeqNr, err)
			}
		}
	}
	load := func(t *testing.T, q durable.Queue[Payload]) durable.State[Payload] {
		t.Helper()
		s, err := q.LoadState(ctx)
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		return s
	}
	seqNrs := func(s durable.State[Payload]) []durable.SeqNr {
		var out []durable.SeqNr
		for _, m := range s.Unconfirmed {
			out = append(out, m.SeqNr)
		}
		return out
	}

	t.Run("empty", func(t *testing.T) {
		q, _ := newQueue(t)
		s := load(t, q)
		if s.CurrentSeqNr != 1 || s.HighestConfirmedSeqNr != 0 || len(s.Confirmed) != 0 || len(s.Unconfirmed) != 0 {
			t.Fatalf("empty state %+v, want (1, 0, {}, [])", s)
		}
	})

	t.Run("every load is a later incarnation", func(t *testing.T) {
		q, reopen := newQueue(t)
		first := load(t, q).Incarnation
		store(t, q, sent(1, ""))
		second := load(t, q).Incarnation
		third := load(t, reopen()).Incarnation
		if first < 1 || second <= first || third <= second {
			t.Fatalf("incarnations of three loads %d, %d, %d: want increasing from at least 1", first, second, third)
		}
	})

	t.Run("stores and loads in order", func(t *testing.T) {
		q, reopen := newQueue(t)
		want := []durable.MessageSent[Payload]{sent(1, ""), sent(2, ""), sent(3, "")}
		store(t, q, want...)
		s := load(t, reopen())
		if s.CurrentSeqNr != 4 {
			t.Fatalf("current %d, want 4", s.CurrentSeqNr)
		}
		for i := range want {
			got := s.Unconfirmed[i]
			if got.SeqNr != want[i].SeqNr || got.Message != want[i].Message || got.Ack != want[i].Ack ||
				got.Qualifier != want[i].Qualifier || !got.Timestamp.Equal(want[i].Timestamp) || got.Chunk != nil {
				t.Fatalf("loaded %+v, want %+v", got, want[i])
			}
		}
	})

	t.Run("store is idempotent", func(t *testing.T) {
		q, reopen := newQueue(t)
		store(t, q, sent(1, ""), sent(2, ""), sent(3, ""))
		store(t, q, sent(3, "")) // a retry after a lost reply
		for _, n := range []durable.SeqNr{2, 5, 1} {
			if err := q.StoreMessageSent(ctx, sent(n, "")); !errors.Is(err, durable.ErrUnexpectedSeqNr) {
				t.Fatalf("store %d with current 4: %v, want ErrUnexpectedSeqNr", n, err)
			}
		}
		if s := load(t, reopen()); !reflect.DeepEqual(seqNrs(s), []durable.SeqNr{1, 2, 3}) || s.CurrentSeqNr != 4 {
			t.Fatalf("unconfirmed %v current %d, want [1 2 3] 4", seqNrs(s), s.CurrentSeqNr)
		}
	})

	t.Run("confirmations per qualifier", func(t *testing.T) {
		q, reopen := newQueue(t)
		store(t, q, sent(1, ""), sent(2, "a"), sent(3, "b"), sent(4, "a"), sent(5, ""))
		confirm := func(n durable.SeqNr, qual string) {
			t.Helper()
			if err := q.StoreMessageConfirmed(ctx, n, qual, at); err != nil {
				t.Fatalf("confirm %d %q: %v", n, qual, err)
			}
		}
		confirm(2, "a")
		confirm(1, "a") // lower: no change
		confirm(3, "b")
		s := load(t, reopen())
		if !reflect.DeepEqual(seqNrs(s), []durable.SeqNr{1, 4, 5}) || s.HighestConfirmedSeqNr != 3 {
			t.Fatalf("unconfirmed %v highest %d, want [1 4 5] 3", seqNrs(s), s.HighestConfirmedSeqNr)
		}
		if c := s.Confirmed["a"]; c.SeqNr != 2 || !c.Timestamp.Equal(at) {
			t.Fatalf("confirmation of a %+v, want 2 at %v", c, at)
		}
		confirm(5, "")
		s = load(t, reopen())
		if !reflect.DeepEqual(seqNrs(s), []durable.SeqNr{4}) || s.HighestConfirmedSeqNr != 5 || s.Confirmed[""].SeqNr != 5 {
			t.Fatalf("unconfirmed %v highest %d confirmed %v, want [4] 5", seqNrs(s), s.HighestConfirmedSeqNr, s.Confirmed)
		}
	})

	t.Run("chunks and a partial chunk run", func(t *testing.T) {
		q, reopen := newQueue(t)
		chunk := func(n durable.SeqNr, data string, first, last bool) durable.MessageSent[Payload] {
			return durable.MessageSent[Payload]{SeqNr: n, Timestamp: at,
				Chunk: &durable.Chunk{Data: []byte(data), First: first, Last: last, Manifest: "json"}}
		}
		store(t, q, chunk(1, "ab", true, false), chunk(2, "cd", false, true), chunk(3, "ef", true, false), chunk(4, "gh", false, false))
		s := load(t, reopen())
		if got := s.Unconfirmed[1].Chunk; got == nil || string(got.Data) != "cd" || got.First || !got.Last || got.Manifest != "json" {
			t.Fatalf("chunk 2 loaded as %+v", got)
		}
		s = s.DropPartialChunks()
		if !reflect.DeepEqual(seqNrs(s), []durable.SeqNr{1, 2}) || s.CurrentSeqNr != 3 {
			t.Fatalf("after dropping the partial run: %v current %d, want [1 2] 3", seqNrs(s), s.CurrentSeqNr)
		}
		// A restarted producer stores the message again from its first chunk.
		q = reopen()
		store(t, q, chunk(3, "EF", true, false), chunk(4, "GH", false, true))
		s = load(t, reopen())
		if !reflect.DeepEqual(seqNrs(s), []durable.SeqNr{1, 2, 3, 4}) || s.CurrentSeqNr != 5 || string(s.Unconfirmed[3].Chunk.Data) != "GH" {
			t.Fatalf("unconfirmed %v current %d, want [1 2 3 4] 5 with the new chunks", seqNrs(s), s.CurrentSeqNr)
		}
	})

	t.Run("batches", func(t *testing.T) {
		chunk := func(n durable.SeqNr, first, last bool) durable.MessageSent[Payload] {
			return durable.MessageSent[Payload]{SeqNr: n, Timestamp: at, Chunk: &durable.Chunk{Data: []byte("c"), First: first, Last: last, Manifest: "json"}}
		}
		confirmed := func(qual string, n durable.SeqNr) durable.QualifiedConfirmation {
			return durable.QualifiedConfirmation{Qualifier: qual, SeqNr: n, Timestamp: at}
		}
		for _, tc := range []struct {
			name    string
			batches []durable.Batch[Payload] // stored in turn, each must succeed
			bad     durable.Batch[Payload]   // then stored: must fail with ErrUnexpectedSeqNr (none if it has no message)
			unconf  []durable.SeqNr          // then loaded: the unconfirmed messages,
			current durable.SeqNr            // the current sequence number,
			highest durable.SeqNr            // and the highest confirmed one
		}{
			{name: "stores in order", batches: []durable.Batch[Payload]{{Sent: []durable.MessageSent[Payload]{sent(1, ""), sent(2, ""), sent(3, "")}}},
				unconf: []durable.SeqNr{1, 2, 3}, current: 4},
			{name: "a retry of the last batch stores nothing and confirms again",
				batches: []durable.Batch[Payload]{{Sent: []durable.MessageSent[Payload]{sent(1, ""), sent(2, "")}},
					{Sent: []durable.MessageSent[Payload]{sent(1, ""), sent(2, "")}, Confirmed: []durable.QualifiedConfirmation{confirmed("", 1)}}},
				unconf: []durable.SeqNr{2}, current: 3, highest: 1},
			{name: "a wrong sequence number stores nothing, confirmations neither",
				batches: []durable.Batch[Payload]{{Sent: []durable.MessageSent[Payload]{sent(1, "")}}},
				bad:     durable.Batch[Payload]{Sent: []durable.MessageSent[Payload]{sent(3, ""), sent(4, "")}, Confirmed: []durable.QualifiedConfirmation{confirmed("", 1)}},
				unconf:  []durable.SeqNr{1}, current: 2},
			{name: "qualifiers and confirmations in one batch",
				batches: []durable.Batch[Payload]{{Sent: []durable.MessageSent[Payload]{sent(1, "a"), sent(2, "b"), sent(3, "a")}},
					{Sent: []durable.MessageSent[Payload]{sent(4, "b")}, Confirmed: []durable.QualifiedConfirmation{confirmed("a", 1), confirmed("b", 2)}}},
				unconf: []durable.SeqNr{3, 4}, current: 5, highest: 2},
			{name: "a batch confirmed in part keeps the rest, of each qualifier",
				batches: []durable.Batch[Payload]{{Sent: []durable.MessageSent[Payload]{sent(1, "a"), sent(2, "b"), sent(3, "a"), sent(4, "b"), sent(5, "a")}},
					{Confirmed: []durable.QualifiedConfirmation{confirmed("a", 3), confirmed("b", 2)}}},
				unconf: []durable.SeqNr{4, 5}, current: 6, highest: 3},
			{name: "a batch confirmed in part, then the rest",
				batches: []durable.Batch[Payload]{{Sent: []durable.MessageSent[Payload]{sent(1, ""), sent(2, ""), sent(3, "")}},
					{Confirmed: []durable.QualifiedConfirmation{confirmed("", 1)}},
					{Sent: []durable.MessageSent[Payload]{sent(4, "")}, Confirmed: []durable.QualifiedConfirmation{confirmed("", 3)}}},
				unconf: []durable.SeqNr{4}, current: 5, highest: 3},
			{name: "whole messages and chunks of one qualifier in one batch",
				batches: []durable.Batch[Payload]{{Sent: []durable.MessageSent[Payload]{sent(1, ""), chunk(2, true, false), chunk(3, false, true), sent(4, ""), chunk(5, true, false)}},
					{Confirmed: []durable.QualifiedConfirmation{confirmed("", 2)}}},
				unconf: []durable.SeqNr{3, 4, 5}, current: 6, highest: 2},
			{name: "a partial chunk run after whole messages of its batch is stored again, the whole ones kept",
				batches: []durable.Batch[Payload]{{Sent: []durable.MessageSent[Payload]{sent(1, ""), sent(2, ""), chunk(3, true, false)}},
					{Sent: []durable.MessageSent[Payload]{chunk(3, true, false), chunk(4, false, true)}}},
				unconf: []durable.SeqNr{1, 2, 3, 4}, current: 5},
			{name: "confirmations alone", batches: []durable.Batch[Payload]{{Sent: []durable.MessageSent[Payload]{sent(1, ""), sent(2, "")}},
				{Confirmed: []durable.QualifiedConfirmation{confirmed("", 2)}}}, current: 3, highest: 2},
			{name: "a partial chunk run is stored again from its first chunk",
				batches: []durable.Batch[Payload]{{Sent: []durable.MessageSent[Payload]{sent(1, ""), chunk(2, true, false), chunk(3, false, false)}},
					{Sent: []durable.MessageSent[Payload]{chunk(2, true, false), chunk(3, false, false), chunk(4, false, true)}}},
				unconf: []durable.SeqNr{1, 2, 3, 4}, current: 5},
		} {
			t.Run(tc.name, func(t *testing.T) {
				q, reopen := newQueue(t)
				bq, ok := q.(durable.BatchQueue[Payload])
				if !ok {
					t.Skip("not a BatchQueue")
				}
				for i, b := range tc.batches {
					if err := bq.StoreBatch(ctx, b); err != nil {
						t.Fatalf("batch %d: %v", i, err)
					}
				}
				if len(tc.bad.Sent) > 0 {
					if err := bq.StoreBatch(ctx, tc.bad); !errors.Is(err, durable.ErrUnexpectedSeqNr) {
						t.Fatalf("bad batch: %v, want ErrUnexpectedSeqNr", err)
					}
				}
				s := load(t, reopen())
				if !reflect.DeepEqual(seqNrs(s), tc.unconf) || s.CurrentSeqNr != tc.current || s.HighestConfirmedSeqNr != tc.highest {
					t.Fatalf("unconfirmed %v current %d highest %d, want %v %d %d", seqNrs(s), s.CurrentSeqNr, s.HighestConfirmedSeqNr,
						tc.unconf, tc.current, tc.highest)
				}
			})
		}
		t.Run("sequence numbers must follow one another", func(t *testing.T) {
			q, _ := newQueue(t)
			bq, ok := q.(durable.BatchQueue[Payload])
			if !ok {
				t.Skip("not a BatchQueue")
			}
			if err := bq.StoreBatch(ctx, durable.Batch[Payload]{Sent: []durable.MessageSent[Payload]{sent(1, ""), sent(3, "")}}); err == nil {
				t.Fatal("a batch of 1 and 3 was stored")
			}
		})
	})

	t.Run("honours a cancelled context", func(t *testing.T) {
		q, _ := newQueue(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := q.StoreMessageSent(cctx, sent(1, "")); !errors.Is(err, context.Canceled) {
			t.Fatalf("store with a cancelled context: %v, want context.Canceled", err)
		}
	})
}
