// Package ordering is the order-expiry sample: an order is placed with a
// timer that cancels it unless it is confirmed in time. It shows a
// key-value entity (order), a timed action (order-timed-action) and a
// durable timer working together, and Endpoint serves them over HTTP (the
// contract's `orders` routes), all written only against the public API a
// Trellis user has.
package ordering
