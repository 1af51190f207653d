package delivery

import (
	"context"

	"github.com/trellis-go/trellis/delivery/internal/drain"
	"github.com/trellis-go/trellis/runtime"
)

// Drain stores, before sys shuts down, every confirmation its consumers
// made: each consumer controller tells its producer controller what its
// consumer confirmed (which it otherwise does only every half window),
// and every producer controller with a durable queue (point to point,
// work pulling, sharding) stores all the confirmations it knows of, then
// Drain returns. A producer controller replaced after a Drain and a
// shutdown (the same producer id, on this process or another) sends
// nothing again that a consumer of sys confirmed before Drain was called.
//
// Call it once nothing sends any more (the endpoints and timers that feed
// the producers are stopped), just before sys.Shutdown: a trellis service
// does so in its Shutdown. It returns ctx's error if ctx ends first (a
// durable queue that does not answer, say); Shutdown is then no worse than
// without a Drain. The controllers keep running: messages sent after Drain
// are delivered as usual, and their confirmations stored behind as usual.
func Drain(ctx context.Context, sys *runtime.System) error { return drain.Run(ctx, sys) }

// drainStage is a stage of Drain, as a command of a consumer or producer
// controller.
type drainStage[A any] struct {
	stage drain.Stage
	done  func()
}

func (drainStage[A]) consumerCommand(A) {}
func (drainStage[A]) producerCommand(A) {}

// registerDrain registers the consumer controller for Drain's first stage.
func (c *consumer[A]) registerDrain() {
	self := c.self
	c.undrain = drain.Register(c.ctx.System(), drain.Consumers, func(done func()) {
		self.Tell(drainStage[A]{stage: drain.Consumers, done: done})
	})
}

// onDrain tells the producer controller what was confirmed.
func (c *consumer[A]) onDrain(m drainStage[A]) {
	if c.associated && !c.failed {
		c.sendAck()
	}
	m.done()
}

// registerDrain registers the producer controller for Drain's second
// stage (its durable queue's client registers for the third).
func (p *producer[A]) registerDrain() {
	self := p.self
	p.undrain = drain.Register(p.ctx.System(), drain.Producers, func(done func()) {
		self.Tell(drainStage[A]{stage: drain.Producers, done: done})
	})
}

// leaveDrain leaves Drain's stages: the controller stops or failed.
func (p *producer[A]) leaveDrain() {
	if p.undrain != nil {
		p.undrain()
	}
	if p.dq != nil {
		p.dq.LeaveDrain()
	}
}
