// Package timedactions will own timed actions: stateless handlers called by
// timers, the effects they return (done or error) and their invocation
// through deferred calls.
package timedactions
