// Package delivery owns reliable delivery between actors of the runtime:
// the protocol between producer and consumer controllers, their settings,
// codecs and chunking, and point to point (a producer controller and a
// consumer controller between one producer and one consumer actor), which
// every pattern runs inside. The other two patterns build on it, each in a
// package of its own: delivery/workpulling (one producer, workers that come
// and go) and delivery/sharding (one producer, any entity of a sharded
// entity type). Each pattern gives delivery without loss or
// duplicates while nothing crashes (ordered, but for work pulling, whose
// messages go to any worker), flow control that keeps a fast producer from
// flooding a slow consumer, chunking of large messages, and, with a durable
// producer queue (package durable, and package delivery/redisqueue for
// Redis), at-least-once delivery across a crash of the producer's process.
// A durable producer controller sends a message only once it is stored, but
// asks for the next ones meanwhile, up to
// [ProducerSettings.DurableQueueStoreAhead] beyond the consumer's demand:
// what comes while a store is in flight is stored in the next batch (one
// round trip for many messages), and what is stored ahead goes out as soon
// as the consumer asks. A crash loses what was handed over and not yet
// stored, at most the demand and the store ahead; a producer that must know
// uses [MessageWithConfirmation] (its reply comes once the message is
// stored), or numbers its messages from [RequestNext.CurrentSeqNr] and sends
// again from there after a restart.
//
// A durable queue in Redis is owned by one producer controller at a time,
// across every process on that Redis (durable.Owned): a lease in Redis
// with an epoch, and every store refused, in the store's own script, once
// the epoch moved on. A second controller with the same producer id (on
// another instance of the service) stands by until the owner's lease
// lapses, then takes the queue over and sends, to its own consumer, what
// the queue holds unconfirmed; a deposed owner's stores are refused and it
// stops with an error wrapping durable.ErrFenced.
//
// Point to point crosses instances: a producer controller on one instance
// and a consumer controller on another talk through refs to actors of
// other instances (runtime.RemoteRef, over the cluster transport), with
// the same guarantees (see Across instances).
//
// # Use
//
// The producer side spawns a producer controller ([SpawnProducerController])
// and the producer sends it [ProducerStart]; the consumer side spawns a
// consumer controller ([SpawnConsumerController]) and the consumer sends it
// [ConsumerStart]; one of the two sides connects them
// ([RegisterToProducerController] to the consumer controller, or
// [RegisterConsumer] to the producer controller):
//
//	pc, _ := delivery.SpawnProducerController[Job](sys, "jobs-pc", "jobs", delivery.ProducerSettings{})
//	cc, _ := delivery.SpawnConsumerController[Job](sys, "jobs-cc", delivery.ConsumerSettings{})
//	pc.Tell(delivery.ProducerStart[Job]{Producer: producerAdapter})   // from the producer
//	cc.Tell(delivery.ConsumerStart[Job]{DeliverTo: consumerAdapter}) // from the consumer
//	cc.Tell(delivery.RegisterToProducerController[Job]{ProducerController: pc})
//
// The producer gets a [RequestNext] each time it may send one message, to
// RequestNext.SendNextTo, or with a reply once it is confirmed (or stored)
// to RequestNext.AskNextTo. The consumer gets each message in a [Delivery]
// and confirms it with [Delivery.Confirm]; the next Delivery comes only
// then.
//
// # From a service's own code
//
// A [Producer] handle ([NewProducer]) is the producer for code that is not
// an actor (an HTTP endpoint, a timed action, an entity command):
// [Producer.Send] waits for the consumer's demand, bounded by its context,
// and returns once the message is handed over or, with a durable queue,
// stored; [Producer.Err] is non-nil once the controller stopped (a
// readiness check). [Drain] stores, before a graceful shutdown, what the
// consumers confirmed, so that a restart sends none of it again; a trellis
// service drains in its Shutdown. In a service on several instances,
// trellis.NewDurableProducer gives a Send that works on every instance:
// the durable queue has one owner at a time, and the others hand their
// messages to it.
//
// # Work pulling and sharding
//
// Package delivery/workpulling runs a producer controller of this package
// for each worker that registered its consumer controller with the
// receptionist, and sends each message to a random worker with demand.
// Package delivery/sharding runs one for each entity of a sharded entity
// type that it sends to, and the entities run consumer controllers of this
// package, one per producer. A worker's or an entity's consumer gets each
// [Delivery] and confirms it as with point to point.
//
// Both patterns chunk large messages with the point-to-point settings
// (their ProducerSettings apply to every internal producer controller),
// and with a durable queue store whole messages, qualified by worker or
// entity, in the work-pulling or sharding controller itself.
//
// Producer and consumer must be local to their controllers: between them
// and their controllers messages are plain tells, with nothing to make up
// for a lost one. Every ref of this runtime is in-process, so local means
// an actor of the controller's own System, or a message adapter of one
// (runtime.IsLocal): not an actor of another System, even one in the same
// process, nor an ask's reply address. Every controller checks the
// producer or consumer it is given ([ProducerStart], [ConsumerStart],
// workpulling.Start, sharding.Start, and the ConsumerStart of a sharded
// entity's consumer) and stops if it is not local. Between the two
// controllers anything may happen to a message — lost, repeated, late —
// and the protocol makes up for it.
//
// # The protocol
//
// Every message gets a sequence number, 1 for a producer's first. The
// consumer controller drives the flow with a window W (default 50): it
// answers the first message s with Request(0, s-1+W), and whenever only W/2
// of its demand is left after a confirmation it asks for W/2 more, so at
// most W messages are in flight and the producer controller hears of
// confirmations every W/2. The producer controller keeps what is sent until
// it is confirmed. A gap in the sequence numbers makes the consumer
// controller ask for a Resend from the missing one, and drop everything
// else until it comes; duplicates are dropped. A consumer controller that
// hears nothing for a while (2 s, then 1.5 times longer up to 30 s) asks
// again, which brings back a lost last message. The first message of an
// association (marked first) is sent again every second until it is
// confirmed; every producer controller instance has an incarnation id, so
// a consumer controller tells a new producer controller from the old one
// and starts over with it at its first message. The instances of one
// producer id are also ordered ([SequencedMessage.Generation]: the durable
// queue counts its loads; without one, the process counts the controllers
// it makes), and a consumer controller never goes back to an earlier one,
// however late its messages come. A producer
// controller numbers its associations with consumer controllers
// ([SequencedMessage.Association]): a Request, Ack or Resend of an
// association that a new consumer controller replaced is ignored, so a
// consumer controller that is gone cannot confirm, open the window or
// steer resending for its successor. Registrations are ordered too: each
// [RegisterConsumer] is numbered as it is made (by the consumer controller
// when it handles [RegisterToProducerController], keeping the number on
// every retry; on arrival when sent to the producer controller directly),
// and the producer controller takes none older than the one it has, so a
// late or repeated registration of a consumer controller replaced since,
// gone or still running, cannot take the stream back from its successor.
// A new consumer controller gets the
// next message (the oldest unconfirmed, or the next one the producer
// sends) with nothing more from anyone. With OnlyFlowControl nothing is
// resent: gaps are delivered and the producer controller keeps nothing.
// A chunked message that lost a chunk is dropped as soon as the gap shows
// (a later chunk, or the next message's first chunk) and never delivered;
// one whose last chunk is lost with nothing after it is dropped too, and
// the stream goes on: once the consumer controller is idle for
// ResendIntervalMin it counts every message that came as done (delivered
// or lost) and asks for a whole window past it, which the producer
// controller opens past what it sent. A confirmation (the reply to
// [MessageWithConfirmation]) then means the message was delivered and
// confirmed, or lost.
//
// Where the reference implementation is weak this one does better: the head
// of the unconfirmed messages is marked first before it is resent (one
// round trip, not two); a Delivery the consumer lost is delivered again
// after [ConsumerSettings.RedeliverAfter] instead of hanging the stream
// (with the same SeqNr, and a second Confirmed for it is ignored); and a
// durable producer controller restarted with nothing unconfirmed starts at
// the stored sequence number without failing. [Delivery.Confirm] confirms
// its own Delivery and no other, however late it is called.
//
// # When a message can come twice
//
// With resending on (not OnlyFlowControl) nothing is lost, and a message
// reaches the consumer twice only in these cases, whatever the network
// between the two controllers does (losing, repeating, reordering):
//
//   - A Delivery stays unconfirmed for [ConsumerSettings.RedeliverAfter]:
//     the same Delivery (same SeqNr) comes again to the consumer, and only
//     one of its confirmations counts.
//   - A consumer controller is replaced (its consumer stopped, or another
//     consumer controller registered with the producer controller): the
//     new one may get again what the old one delivered and its producer
//     controller had not yet heard confirmed, at most FlowControlWindow
//     messages. A RegisterConsumer older than the producer controller's
//     current registration (late, or a retry of a replaced consumer
//     controller) replaces nothing: it is ignored.
//   - A producer controller with a durable queue is replaced (it failed,
//     its process died, or it stopped without [Drain], and a new one loads
//     the same queue, in this process or, once the old one's lease lapsed,
//     in another): the new one sends again what the queue holds
//     unconfirmed (confirmations are stored behind the flow). After a
//     [Drain] and a graceful stop, the queue holds unconfirmed only what
//     no consumer had confirmed: nothing comes twice.
//   - A worker leaves a work-pulling producer controller: the messages it
//     had not confirmed go to other workers.
//   - For sharding, the same per entity: the entity's consumer stops or is
//     restarted, or the sharding producer controller with a durable queue is
//     replaced. Passivation alone never causes one: an entity is passivated
//     only when its consumer controllers hold nothing, and they tell their
//     producer controllers what was confirmed as they stop, before anything
//     is sent to the entity's next incarnation.
//
// Without a crash, a replacement or a redelivery, every message comes
// exactly once; the package's randomized tests hold each case to its bound.
//
// # What each fault costs
//
// With resending on and a durable queue (in Redis for the process faults):
//
//   - A lost, repeated or late message between the controllers: nothing;
//     the protocol makes up for it.
//   - The consumer's process dies, or its consumer controller is replaced:
//     up to FlowControlWindow messages delivered again to the new one.
//   - The producer's process is killed (kill -9, a lost machine): what was
//     handed to the controller and not yet stored is lost (at most the
//     demand and DurableQueueStoreAhead; a producer that must know uses
//     MessageWithConfirmation or Producer.Send); what was stored is sent
//     again by the next controller of the producer id, including what was
//     delivered and not yet known confirmed in the queue (up to
//     FlowControlWindow, plus confirmations not yet written behind). On
//     another process that controller takes over when the lease lapses
//     (redisqueue.DefaultLease, 10 s after the dead owner's last renewal):
//     that long, nothing is sent.
//   - A graceful stop with [Drain]: nothing lost, nothing twice.
//   - The owner freezes past its lease (a long pause) while a standby
//     takes over: the deposed owner's next store (or lease renewal) is
//     refused and it stops; what it sends meanwhile from what it had
//     stored may reach its consumer as well as the new owner's.
//   - The durable queue fails: each call is retried
//     (DurableQueueRetryAttempts, DurableQueueRequestTimeout); then the
//     controller stops (see Failures); a failed confirmation store is only
//     retried (fatal only when the queue refuses the controller as
//     deposed), and costs at most duplicates after a restart.
//
// # Across instances
//
// What crosses instances is the traffic between the two controllers of
// point to point: [SequencedMessage] from the producer controller, and
// [Request], [Resend], [Ack] and [RegisterConsumer] from the consumer
// controller, plus [RegisterToProducerController] and [DeliverThenStop]
// sent to a consumer controller from afar. The producer and the consumer
// stay local to their controllers ([ErrNotLocal]). Connect the two sides
// by exposing one controller (runtime.Expose) and giving the other a
// runtime.RemoteRef to it:
//
//	// instance A
//	pc, _ := delivery.SpawnProducerController[Job](sysA, "jobs-pc", "jobs", delivery.ProducerSettings{})
//	at, _ := runtime.Expose(sysA, pc) // at.Addr, at.Path: tell instance B
//	// instance B
//	cc.Tell(delivery.RegisterToProducerController[Job]{
//		ProducerController: runtime.RemoteRef[delivery.ProducerCommand[Job]](sysB, at.Addr, at.Path)})
//
// The protocol's messages travel in a compact binary form; the producer's
// message A inside them is encoded by the codec the System has for A
// (runtime.RegisterCodec; JSON by default), or travels as chunks. A
// controller registers these codecs with its System as it starts.
// Registrations ([RegisterConsumer]) and the generations of producer
// controllers without a durable queue are stamped by a hybrid clock (the
// wall clock, rising within a process), so that across instances a later
// one ranks higher as long as the instances' clocks agree closer than the
// two events are apart.
//
// The transport carries one sender's messages to one instance in order,
// or loses them (a connection that breaks loses what was in flight; a full
// queue to a peer, TellQueue, makes a message a dead letter, counted by
// runtime.System.RemoteDeadLetters). A burst past that queue is not
// silently lost, nor does the sender block: its messages are dead letters
// that the protocol sends again as it does those lost on the link, at a
// cost of delay and resends (a window of 100 through a queue of 16 sent
// each message about four times), so keep the windows of the controllers
// that send to one instance within its TellQueue (peer.DefaultTellQueue,
// 1024, against DefaultFlowControlWindow, 50). What each fault of the
// link costs, with resending on:
//
//   - A connection cut, garbled or stalled, or a partition that heals:
//     nothing lost, nothing twice; the messages lost in flight are asked
//     for again (a gap is seen at once, a lost request after
//     ResendIntervalMin idle, growing ×1.5 to ResendIntervalMax), and the
//     transport dials again (backoff 50 ms doubling to 5 s). Cost: delay.
//   - The consumer's instance dies: the producer controller keeps the
//     unconfirmed messages and sends them to the consumer controller that
//     registers next (on any instance): up to FlowControlWindow messages
//     may come twice, as for a replaced consumer controller.
//   - The producer's instance dies: as the producer's process above.
//     Without a durable queue, what the controller held unconfirmed is
//     lost: the consumer got a prefix of its stream, in order, each
//     message once; a new producer controller of the producer id (on any
//     instance) is a new incarnation, whose stream the consumer controller
//     takes from its first message once it registers with it. With a
//     durable queue in Redis, another instance's controller of the id
//     takes the queue over once the lease lapses, and the consumer
//     controller must register with it: nothing stored is lost, and only
//     messages above the confirmation stored at the death may come twice.
//
// There is no remote death watch: a controller does not learn that its
// peer's instance died; the consumer controller keeps asking (its retry
// tick), the producer controller keeps its unconfirmed messages.
//
// Work pulling crosses instances when the receptionist does: in a trellis
// service in cluster mode (or with runtime.System.Connect), a worker
// registered on any instance is listed to every work-pulling producer
// controller, which runs its point-to-point producer controller for it on
// its own instance. A worker's instance that leaves withdraws its
// registrations; one that dies has them lapse with its lease (the cluster
// lease); either way its worker leaves and what it had not confirmed goes
// to the other workers (at least once: up to its window twice). Sharding
// keeps its entities on the controller's own instance: its regions are
// local.
//
// # Failures
//
// A controller whose peer breaks the protocol (a producer that sends
// without a RequestNext), whose durable queue keeps failing or refuses it
// as deposed (durable.ErrFenced), or whose codec fails, logs the error and
// stops; watch it to learn of it ([Producer.Err] does). So does a
// work-pulling or sharding controller whose producer overfills its buffer
// (workpulling.ErrBufferFull, one error with sharding.ErrBufferFull), and
// any controller given a producer or consumer that
// is not local to it ([ErrNotLocal]; given such a consumer, a sharded
// entity stops, and its consumer with it). The logged error (attribute
// "err") wraps these sentinels, for errors.Is. Settings out of range are
// an error from the constructors (a window below 2, a chunk size below 1
// byte), naming the field, and so is a nil or typed-nil argument (a nil
// spawner, a (*durable.Memory)(nil) queue, a (*runtime.Sharding)(nil)
// region), with [ErrInvalidSettings]. A durable queue that panics fails
// its controller, with an error that says so. A nil *Ack or
// *SequencedMessage is ignored.
//
// # Packages
//
// Package delivery is the public face of the point-to-point controllers,
// whose implementation is delivery/internal/impl: its types are aliases of
// that package's (the same types, so fields and methods are documented
// there: go doc ./delivery/internal/impl TYPE) and its functions call
// that package's. It imports none of its public sub-packages:
// delivery/workpulling and delivery/sharding import it for its names and
// run delivery/internal/impl's controllers directly, with what a user must
// not see (a producer controller that takes its messages without
// RequestNext and carries the pattern controller's generation, the
// consumer controller's report that it holds nothing, which keeps a
// sharded entity from passivation). The containers, the durable queue
// client and the checks the controllers share are in delivery/internal
// too (ring, slab, durablecalls, controller, pattern); the test support of
// the three packages is delivery/internal/testkit/deliverytest.
package delivery
