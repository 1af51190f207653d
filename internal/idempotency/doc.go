// Package idempotency keeps the records of Idempotency-Keys for
// api.Idempotency: in Redis (RedisStore), beside the service's entities
// and timers, or in memory (MemoryStore) for the embedded store. Both
// claim a key atomically: one request runs per key at a time.
package idempotency
