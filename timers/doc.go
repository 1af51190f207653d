// Package timers will own the durable timer scheduler (memory and Redis):
// its event loop, retry backoff, limits and the queries behind the admin API.
package timers
