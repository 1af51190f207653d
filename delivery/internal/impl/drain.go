package impl

import (
	"context"

	"github.com/trellis-go/trellis/delivery/internal/drain"
	"github.com/trellis-go/trellis/runtime"
)

// Drain readies sys's reliable delivery for a shutdown: every consumer
// controller stops delivering (what it has not delivered stays
// unconfirmed, for the next producer controller to send), waits for its
// consumer to confirm the Delivery it is processing, if any, and tells its
// producer controller what was confirmed (which it otherwise does only
// every half window); then every producer controller with a durable queue
// (point to point, work pulling, sharding) stores all the confirmations it
// knows of, and Drain returns. A producer controller that replaces one of
// sys's after a Drain and a shutdown (the same producer id, on this
// process or another) sends nothing again that a consumer of sys
// confirmed.
//
// Call it just before sys.Shutdown, once nothing sends any more (the
// endpoints and timers that feed the producers are stopped): a trellis
// service does so in its Shutdown. Consumers get nothing more after it. It
// returns ctx's error if ctx ends first (a consumer that does not confirm,
// a durable queue that does not answer); Shutdown is then no worse than
// without a Drain.
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

// onDrain stops delivering and, once the Delivery outstanding (if any) is
// confirmed, tells the producer controller what was confirmed.
func (c *consumer[A]) onDrain(m drainStage[A]) {
	c.drained = true
	c.drainDone = m.done
	if !c.outstanding {
		c.drainReported()
	}
}

// drainReported tells the producer controller what was confirmed and ends
// the consumer controller's part of Drain.
func (c *consumer[A]) drainReported() {
	if c.associated && !c.failed {
		c.sendAck()
	}
	done := c.drainDone
	c.drainDone = nil
	done()
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
