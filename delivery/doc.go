// Package delivery will provide reliable delivery on top of the actor runtime:
// producer and consumer controllers for point-to-point delivery, work pulling
// and sharding, a durable producer queue (memory and Redis) and chunking of
// large messages. It imports the runtime package only.
package delivery
