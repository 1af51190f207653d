// Package e2e holds tests of the server binary (cmd/server) as it is
// deployed: several processes on loopback ports, one Redis, faults made
// between them by TCP proxies and signals, and clients over real HTTP.
// It has no code of its own beyond its tests.
package e2e
