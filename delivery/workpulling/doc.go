// Package workpulling owns the work-pulling pattern of reliable delivery:
// one producer, any number of workers that come and go, each message
// processed by one of them.
//
// Workers register their consumer controller (a
// delivery.SpawnConsumerController, started by the worker with
// delivery.ConsumerStart) with the receptionist under a service key; a
// work-pulling producer controller ([SpawnProducerController]) subscribes
// to it, runs a point-to-point producer controller of package delivery for
// each worker, and sends each message to a random worker with demand
// ([RequestNext] comes whenever one has some). The messages a worker that
// leaves has not confirmed go to the others, so a message may be processed
// twice, never lost: delivery is at least once. [GetWorkerStats] tells how
// many workers there are. With a cluster-wide receptionist (a trellis
// service in cluster mode, see runtime.System.Connect) the workers
// may run on any instance; go doc ./delivery, "Across instances", says
// what a worker instance's death or departure costs.
//
//	key := runtime.NewServiceKey[delivery.ConsumerCommand[Job]]("jobs-workers")
//	runtime.Register(sys, key, workerCC)  // each worker's consumer controller
//	wp, _ := workpulling.SpawnProducerController[Job](sys, "jobs-wp", "jobs", key, workpulling.Settings{})
//	wp.Tell(workpulling.Start[Job]{Producer: producer}) // from the producer
//
// The protocol, chunking (Settings.Producer.ChunkLargeMessages, with the
// codec of delivery.WithProducerCodec), durable queues
// (delivery.WithDurableQueue: every message is stored, qualified by its
// worker, in the work-pulling controller itself), when a message can come
// twice and how a controller fails are package delivery's (go doc
// ./delivery). This package owns the work-pulling producer controller, its
// settings and its messages; what it shares with package
// delivery/sharding is in delivery/internal/pattern.
package workpulling
