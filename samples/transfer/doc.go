// Package transfer is the workflow sample: money moved between two
// wallets (key-value entities) by a transfer workflow that withdraws, then
// deposits, undoes the withdrawal when the deposit keeps failing (a
// compensation), and waits for an approval above an amount (a pause with
// a timeout), written only against the public API a Trellis user has.
// Setup starts both in a service; the tests drive it through the
// component client, as an endpoint would.
package transfer
