package runtime

import (
	"fmt"
	"runtime/debug"
)

// sysKind names a system message: the runtime's own mail to an actor.
type sysKind uint8

const (
	sysStart        sysKind = iota + 1 // deliver Started
	sysStop                            // begin stopping
	sysWatch                           // ref watches this actor
	sysUnwatch                         // ref no longer watches this actor
	sysTerminated                      // ref, which this actor watched, has stopped
	sysChildStopped                    // child ref named name has stopped
	sysTimer                           // the timer key of generation gen fired
	sysRestart                         // the restart backoff has passed
	sysIdle                            // check whether the entity has been idle long enough
)

// sysMsg is a value, not an interface, so queuing one allocates nothing.
type sysMsg struct {
	kind sysKind
	ref  actorCell
	name string
	key  any
	gen  uint64
}

// beginStop stops the actor's children and then, when they have all
// stopped, the actor itself. From here on no user message is handled.
func (c *cell[T]) beginStop() {
	if c.state != alive {
		return
	}
	c.mu.Lock()
	c.state = stopping
	c.mu.Unlock()
	c.cancelAllTimers()
	if c.x == nil || len(c.x.children) == 0 {
		c.finish()
		return
	}
	for _, child := range c.x.children {
		child.sendSystem(sysMsg{kind: sysStop})
	}
}

// finish terminates the actor: it signals Stopped, turns what is left in the
// mailbox into dead letters, and tells its watchers, the receptionist and
// its parent.
func (c *cell[T]) finish() {
	c.signal(Stopped{})

	c.mu.Lock()
	c.state = dead
	inbox, sysq := c.inbox, c.sysq
	c.inbox, c.sysq = nil, nil
	c.sysLen.Store(0)
	c.mu.Unlock()

	left := c.batch[c.next:]
	if x := c.x; x != nil {
		left = append(x.unstashed[x.unext:], left...)
	}
	left = append(left, c.closeHeld()...)
	for _, msg := range append(left, inbox...) {
		c.sys.deadLetter(c, msg)
	}
	c.batch, c.next = nil, 0
	for _, m := range sysq {
		if m.kind == sysWatch {
			m.ref.sendSystem(sysMsg{kind: sysTerminated, ref: c})
		}
	}

	if x := c.x; x != nil {
		if x.restartTimer != nil {
			x.restartTimer.Stop()
		}
		if x.asks != nil {
			x.asks.Abandon()
		}
		for w := range x.watchers {
			w.sendSystem(sysMsg{kind: sysTerminated, ref: c})
		}
		for w := range x.watching {
			w.sendSystem(sysMsg{kind: sysUnwatch, ref: c})
		}
		x.watchers, x.watching, x.unstashed = nil, nil, nil
	}
	c.sys.reception.actorStopped(c)
	c.sys.unexpose(c)
	c.parent.childStopped(c.name, c)
}

// fail handles a panic in the behavior as the actor's supervision says.
func (c *cell[T]) fail(cause any) {
	c.logger().Error("actor failed", "panic", fmt.Sprint(cause), "stack", string(debug.Stack()))
	switch c.super.kind {
	case resumeOnFailure:
		return
	case stopOnFailure:
		c.stopSelf = true
		return
	}
	x := c.ext()
	now := c.sys.clock.Now()
	if x.failures > 0 && now.Sub(x.lastFailure) > c.super.resetAfter() {
		x.failures = 0
	}
	x.failures++
	x.lastFailure = now
	if c.super.maxRestarts > 0 && x.failures > c.super.maxRestarts {
		c.logger().Error("actor stopped: too many restarts", "restarts", c.super.maxRestarts)
		c.stopSelf = true
		return
	}
	c.signal(Restarting{Cause: cause})
	c.mu.Lock()
	c.suspended = true
	c.mu.Unlock()
	delay := c.super.backoff(x.failures)
	if delay <= 0 {
		c.restart()
		return
	}
	// The timers belong to the failed incarnation: cancel them now, or
	// their messages would reach it during the backoff.
	c.cancelAllTimers()
	c.logger().Info("actor restarts after backoff", "backoff", delay.String(), "failures", x.failures)
	x.restartTimer = c.sys.clock.AfterFunc(delay, func() { c.sendSystem(sysMsg{kind: sysRestart}) })
}

// restart replaces the failed behavior with a fresh one from the factory.
// Children and watches are kept; timers and stashed messages belonged to the
// failed incarnation and are dropped.
func (c *cell[T]) restart() {
	if c.state != alive {
		return
	}
	c.cancelAllTimers()
	afterBackoff := false
	if x := c.x; x != nil {
		for _, msg := range x.unstashed[x.unext:] {
			c.sys.deadLetter(c, msg)
		}
		afterBackoff = x.restartTimer != nil
		x.unstashed, x.unext, x.restartTimer = nil, 0, nil
	}
	c.setBehavior(c.factory())
	c.postpone.Store(false) // the failed incarnation's wish
	c.mu.Lock()
	c.suspended = false
	c.mu.Unlock()
	c.signalFailable(Started{})
	if afterBackoff && c.state == alive {
		// watchedTerminated ignored the ends that came during the backoff.
		// Watching again brings them back (at once from an actor that has
		// terminated); to a live actor it changes nothing, and a second
		// Terminated for the same end finds the watch gone and is dropped.
		for t := range c.x.watching {
			t.sendSystem(sysMsg{kind: sysWatch, ref: c})
		}
	}
}

func (c *cell[T]) setBehavior(b Behavior[T]) {
	c.behavior = b
	c.signals, _ = b.(SignalHandler[T])
}

// signalName is a signal's name for logs.
func signalName(sig Signal) string {
	switch sig.(type) {
	case Started:
		return "Started"
	case Stopped:
		return "Stopped"
	case Restarting:
		return "Restarting"
	case Terminated:
		return "Terminated"
	}
	return fmt.Sprintf("%T", sig)
}
