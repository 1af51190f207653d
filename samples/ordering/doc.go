// Package ordering will hold the order-expiry sample: an order is cancelled
// by a timer unless it is confirmed in time.
package ordering
