package entities_test

import (
	"context"
	"testing"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// The cost of one command through the entity actor on the in-memory store,
// so that what the entity does per command (decode the state it holds,
// run the handler, check or write the store) is not hidden by a network
// round trip; the HTTP benchmark in the root package has the whole path.

// benchCounter is a small state, like the counter sample's.
type benchCounter struct {
	ID    string `json:"id"`
	Value int    `json:"value"`
}

var (
	benchCounters = entities.Define("bench-counter", func(id string) benchCounter { return benchCounter{ID: id} })
	benchGet      = entities.Command(benchCounters, "get",
		func(ctx *entities.Ctx[benchCounter, benchCounter], c benchCounter, _ components.Done) entities.Effect[benchCounter, benchCounter] {
			return ctx.Reply(c)
		})
	benchIncrease = entities.Command(benchCounters, "increase",
		func(ctx *entities.Ctx[benchCounter, benchCounter], c benchCounter, n int) entities.Effect[benchCounter, benchCounter] {
			c.Value += n
			return ctx.UpdateState(c).ThenReply(c)
		})
)

// BenchmarkEntityCommand: a reply (get) and an update (increase) on one
// entity, one at a time.
func BenchmarkEntityCommand(b *testing.B) {
	client := benchHost(b)
	ctx := context.Background()
	if _, err := benchIncrease.Invoke(ctx, client, "c", 1); err != nil {
		b.Fatal(err)
	}
	b.Run("get", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := benchGet.Invoke(ctx, client, "c", components.Done{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("increase", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := benchIncrease.Invoke(ctx, client, "c", 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchHost starts benchCounters on a runtime system and a memory store,
// stopped when b ends, and returns the client that reaches it.
func benchHost(b *testing.B) *components.Client {
	sys := testenv.System(b, b.Name())
	client := components.NewClient(components.NewRegistry())
	if _, err := benchCounters.Start(entities.Host{System: sys, Client: client, Store: entities.NewMemoryStore()}); err != nil {
		b.Fatal(err)
	}
	return client
}
