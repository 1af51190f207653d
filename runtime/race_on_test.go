//go:build race

package runtime_test

// raceEnabled says the race detector is on: stress tests do fewer rounds,
// each being several times slower.
const raceEnabled = true
