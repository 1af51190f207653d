// Package node is an instance's part in a Trellis cluster: the
// transport the other instances reach it by (internal/peer) with the
// kinds of forwarded call its parts register ([Node.Handle]), its
// membership in Redis (internal/cluster) joined again when it is lost,
// the entity layer's side (internal/cluster/entityhost) whose rebalancer moves
// shards to this instance and away, the placement of sharded actors,
// the cluster-wide receptionist, the cluster's series on /metrics and
// what the admin API reads of the cluster.
//
// [Join] connects and joins (or, when Redis does not answer yet, starts
// unready and joins once it does); [Node.Start] lets the rebalancer take
// shards once every other part runs; [Node.Shutdown] hands the shards
// over and stops the transport; [Node.Crash] ends it without a goodbye,
// for a test kit's kill. [Shards] is the membership of the moment, which
// the entity layer, the consumers, the views and the workflows read; an
// instance that is not part of a cluster reads [Every] instead and has
// no Node.
package node
