// Package impl is the implementation of package delivery's point-to-point
// controllers: the protocol's messages, the producer and consumer
// controllers' state machines, chunking, the wire form, settings and
// drain. Package delivery is its public face (aliases and thin
// functions, documented there); the pattern controllers
// (delivery/workpulling, delivery/sharding, through
// delivery/internal/pattern) build on it directly, as this package's
// PatternProducer and PatternConsumer.
package impl
