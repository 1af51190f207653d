package entities

// MaxJitter is maxJitter, for the tests of package entities_test.
const MaxJitter = maxJitter

// MaxRoutes is how often a command follows its shard before it gives up.
const MaxRoutes = maxRoutes
