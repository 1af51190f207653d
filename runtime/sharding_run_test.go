package runtime_test

import (
	"testing"

	trt "github.com/trellis-go/trellis/runtime"
)

// TestShardingRun: Run hands an idle entity's message to it on the
// caller's goroutine, so it is handled when Run returns; to a busy entity
// it only queues the message, in order with the rest of its mail; and a
// message that makes the entity fail is handled as any failure is (the
// entity restarts), never reaching the caller.
func TestShardingRun(t *testing.T) {
	sys := newSystem(t)
	ents := newShardingEntities()
	s := shardingInit(t, sys, ents, -1)

	s.Tell("e", shardingCmd{n: 1}) // starts the entity
	ents.expect(t, shardingEvent{"e", 1, 1, 1})
	eventually(t, "the entity is idle", func() bool { return trt.ShardingIdle(s, "e") })
	s.Run("e", shardingCmd{n: 2})
	select {
	case got := <-ents.events:
		if want := (shardingEvent{"e", 1, 2, 2}); got != want {
			t.Fatalf("event %+v, want %+v", got, want)
		}
	default:
		t.Fatal("Run returned before the idle entity handled its message")
	}

	// Busy: its handler waits on hold; Run must not wait for it.
	hold := make(chan struct{})
	busy, err := trt.InitSharding(sys, trt.Entity[chan struct{}]{
		Key: trt.NewEntityTypeKey[chan struct{}]("busy"),
		Create: func(string) trt.Behavior[chan struct{}] {
			return trt.ReceiveFunc(func(_ *trt.Context[chan struct{}], done chan struct{}) {
				<-hold
				close(done)
			})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	first, second := make(chan struct{}), make(chan struct{})
	busy.Tell("b", first)
	returned := make(chan struct{})
	go func() {
		busy.Run("b", second)
		close(returned)
	}()
	recv(t, returned)
	close(hold)
	recv(t, first)
	recv(t, second)

	// A failure: the entity restarts; the caller goes on.
	s.Run("e", shardingCmd{fail: true})
	s.Run("e", shardingCmd{n: 3})
	ents.expect(t, shardingEvent{"e", 2, 3, 1})
}
