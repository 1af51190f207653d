// Package sharding owns the sharding pattern of reliable delivery: one
// producer sending to any entity of one sharded entity type, by entity id,
// each entity's messages in order.
//
// The entities of the sharded entity type run [NewConsumerController] (it
// starts their consumer and runs a point-to-point consumer controller of
// package delivery per producer); a sharding producer controller
// ([SpawnProducerController]) sends to any of them by entity id, through a
// producer controller of package delivery per entity, whose first message
// starts the entity. [RequestNext] says which entities have demand and
// what is buffered for the others.
//
//	create, _ := sharding.NewConsumerController(newConsumer, sharding.ConsumerSettings{})
//	region, _ := runtime.InitSharding(sys, runtime.Entity[delivery.ConsumerCommand[Job]]{Key: key, Create: create})
//	sp, _ := sharding.SpawnProducerController[Job](sys, "jobs-sp", "jobs", region, sharding.Settings{})
//	sp.Tell(sharding.Start[Job]{Producer: producer}) // from the producer
//
// An entity is not passivated while one of its consumer controllers holds
// a message (a delivery.Delivery not yet confirmed, or one not yet
// delivered); one passivated while messages to it were on their way is
// woken by their resending. The producer controllers of unused entities
// are cleaned up. An entity that hears from several producers has one
// Delivery outstanding per producer, so its consumer confirms each with
// its own Confirm.
//
// # Across instances
//
// On a cluster instance (the service's Host, or any System with a
// runtime.Placement) the region is the whole cluster's: each entity runs
// on the instance that owns its shard now, and the sharding producer
// controller, on any instance, reaches it wherever that is. What crosses
// instances is what its producer controller and its consumer controller
// say to each other (SequencedMessage one way, Request, Resend and Ack the
// other, in package delivery's binary wire form, the message A encoded
// with the codec the System has for A), plus the entity id; the producer,
// its sharding producer controller and the entities' producer controllers
// stay on the producer's instance, the consumers and their consumer
// controllers on the entity's. Every instance whose entities may be sent
// to from afar registers the codecs before (delivery.RegisterCodecs[A]):
// the first message there starts the entity.
//
// When a shard moves (an instance leaves or joins and the rebalancer hands
// the shard over), its entities stop on the old owner before the release,
// and the messages sent meanwhile are dead letters or reach the new owner
// once its instance is known: a message that reaches an instance that no
// longer owns its entity is sent on once to the owner that instance
// knows, and is a dead letter after that. Nothing waits for an owner: the
// producer controller of each entity sends its unconfirmed messages again
// after ResendFirstUnconfirmedIdleTimeout, and the new incarnation takes
// them from the first unconfirmed one. What each fault costs:
//
//   - a graceful leave or a join (shards handed over): nothing lost; each
//     entity's messages stay in order, except that the ones it had
//     delivered but whose confirmation had not reached its producer
//     controller yet are delivered again by the new owner (at most the
//     consumer's FlowControlWindow per entity and move); a pause of about
//     ResendFirstUnconfirmedIdleTimeout per moved entity.
//   - an instance killed (kill -9, or cut off until its lease lapses): the
//     same, after the membership lease lapses and the others take its
//     shards (TRELLIS_CLUSTER_LEASE); until then its entities' messages
//     are dead letters, resent later. Its consumers may have delivered
//     more that they confirmed to nobody: those come again too, within
//     the same window bound.
//   - the producer's instance killed: as a producer's process dying (go
//     doc ./delivery): only a durable queue keeps its messages.
//   - a connection cut (what was in flight lost): nothing lost, nothing
//     twice, order kept: resent by the protocol, as point to point.
//
// TestRemoteSharding (remote_test.go) runs these over three real systems
// and Redis, 20 seeds per case (-delivery.remoteseeds=1000 for a long run).
//
// The protocol, chunking (Settings.Producer.ChunkLargeMessages), durable
// queues (delivery.WithDurableQueue: every message is stored as it
// arrives, qualified by its entity id, in the sharding controller itself),
// when a message can come twice and how a controller fails are package
// delivery's (go doc ./delivery). This package owns the sharding producer
// controller, the entities' consumer side, their settings and their
// messages; what it shares with package delivery/workpulling is in
// delivery/internal/pattern.
package sharding
