package entities

// MaxJitter is maxJitter, for the tests of package entities_test.
const MaxJitter = maxJitter
