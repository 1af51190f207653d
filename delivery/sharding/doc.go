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
// The protocol, chunking (Settings.Producer.ChunkLargeMessages), durable
// queues (delivery.WithDurableQueue: every message is stored as it
// arrives, qualified by its entity id, in the sharding controller itself),
// when a message can come twice and how a controller fails are package
// delivery's (go doc ./delivery). This package owns the sharding producer
// controller, the entities' consumer side, their settings and their
// messages; what it shares with package delivery/workpulling is in
// delivery/internal/pattern.
package sharding
