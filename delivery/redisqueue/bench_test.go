package redisqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/redisqueue"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// BenchmarkStoreMessageSent is the cost of one stored message: one script
// round trip. Compare with BenchmarkPing, the bare round trip.
func BenchmarkStoreMessageSent(b *testing.B) {
	client := testenv.Redis(b)
	ctx := context.Background()
	q, err := redisqueue.New[int](client, "trellis-bench:"+uuid.NewString(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = q.Delete(ctx) })
	now := time.Now()
	seqNr := durable.SeqNr(1)
	for b.Loop() {
		if err := q.StoreMessageSent(ctx, durable.MessageSent[int]{SeqNr: seqNr, Message: int(seqNr), Timestamp: now}); err != nil {
			b.Fatal(err)
		}
		seqNr++
	}
}

// BenchmarkStoreMessageConfirmed is the cost of one stored confirmation.
func BenchmarkStoreMessageConfirmed(b *testing.B) {
	client := testenv.Redis(b)
	ctx := context.Background()
	q, err := redisqueue.New[int](client, "trellis-bench:"+uuid.NewString(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = q.Delete(ctx) })
	now := time.Now()
	seqNr := durable.SeqNr(1)
	for b.Loop() {
		if err := q.StoreMessageConfirmed(ctx, seqNr, durable.NoQualifier, now); err != nil {
			b.Fatal(err)
		}
		seqNr++
	}
}

// BenchmarkPing is a bare round trip to the same Redis.
func BenchmarkPing(b *testing.B) {
	client := testenv.Redis(b)
	ctx := context.Background()
	for b.Loop() {
		if err := client.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
}
