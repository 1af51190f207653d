// Package runtime owns Trellis's actors: typed refs and behaviors, the mailbox
// and the dispatcher that runs it, ask, watch, stash, per-actor timers,
// supervision, dead letters, the receptionist and local sharding of entities.
//
// # The model
//
// An actor is a [Behavior] behind a [Ref]. Messages sent with [Ref.Tell] are
// queued in the actor's mailbox; the actor handles them one at a time, in the
// order each sender sent them. Nothing else of the actor is shared: its state
// lives in the Behavior value that its factory built, so the runtime can
// restart it with fresh state after a panic.
//
//	type counter struct{ n int }
//	func (c *counter) Receive(ctx *runtime.Context[Inc], msg Inc) { c.n += msg.By }
//
//	sys := runtime.NewSystem("demo")
//	defer sys.Shutdown(context.Background())
//	ref, _ := runtime.Spawn(sys, "counter", func() runtime.Behavior[Inc] { return &counter{} })
//	ref.Tell(Inc{By: 1})
//
// # Mailbox and dispatcher
//
// Every actor has one mailbox: a queue of user messages and a queue of system
// messages (stop, watch, terminated, timers), and system messages overtake
// user messages. A message to an idle actor schedules its mailbox once on the
// dispatcher, a fixed pool of long-lived worker goroutines. A worker runs a
// mailbox for up to Throughput messages; if other mailboxes are waiting it
// then yields the worker and the mailbox is scheduled again, otherwise it
// keeps going (yielding to nobody only costs time). A mailbox scheduled
// while the worker that last ran it is busy waits for that worker, so
// request/response chains stay on one processor; idle workers steal what
// busy ones cannot take soon. So an actor never handles two messages at
// once, no goroutine is started per message or per actor, and an idle actor
// costs only its memory.
//
// A caller that is about to wait for the answer skips the dispatcher too:
// [Sharding.Run], and [Ask] from plain Go code with a context that never
// ends, hand a request to an idle actor of this instance by running it at
// once on the caller's goroutine.
//
// Two opt-in shortcuts serve small actors that others keep busy, such as
// reliable delivery's controllers. A message through a [DirectAdapter] to
// an idle actor skips the dispatcher: the actor runs at once on the
// sender's goroutine. An actor that waits for one particular message can
// [Context.PostponeWakeups], so that mail sent with [TellPostponable] is
// held until it stops postponing.
//
// Cells are padded to whole cache lines, so that two actors running on two
// processors never share one.
//
// # Actors of other instances
//
// A [RemoteRef] addresses an actor of another instance: Tell encodes the
// message with the [Codec] registered for its type ([RegisterCodec]; JSON
// by default) and hands it to the transport that [System.Connect] linked
// in; the receiving System decodes it and tells the actor that was exposed
// there ([Expose]), in the order told per sender and receiver, at most
// once. What cannot be encoded, sent, decoded or delivered is a dead
// letter ([System.RemoteDeadLetters]). This package knows no network: a
// trellis service links its cluster transport in, once. With a
// [Directory] in the [Link] the receptionist is cluster-wide. There is no
// remote watch.
//
// # Rules for behaviors
//
// A [Context] belongs to its actor: use it only inside Receive or OnSignal,
// never from another goroutine. Functions passed to [MessageAdapter] and
// [AskFrom] run on the goroutine that sends the reply, so they must only map
// values. A Receive that blocks holds a worker for as long as it blocks.
package runtime
