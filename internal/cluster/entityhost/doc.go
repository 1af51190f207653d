// Package entityhost joins the entity layer to the cluster: it is the
// [entities.Cluster] of an instance, made of its [cluster.Member], the
// [cluster.Rebalancer] it runs, and the [peer.Client] that reaches the
// other instances; and it provides the [peer.Handler] that runs the
// commands other instances forward here.
//
//	host, err := entityhost.New(entityhost.Config{Member: m, Peers: peers, Registry: reg})
//	srv, err := peer.NewServer(peer.ServerConfig{Secret: secret, Handler: host.Handle})
//	running, err := Counters.Start(entities.Host{..., Store: entities.NewShardedRedisStore(rdb, prefix), Cluster: host})
//	host.Rebalancer().Start()
//	defer host.Rebalancer().Leave(ctx) // hands every shard over, then leaves
//
// # Routing
//
// A command runs here when this instance serves its entity's shard (owns
// it, its lease surely valid, and not handing it over): it is admitted,
// counted in flight, and run by the local entity. Otherwise it goes to the
// owner the rebalancer's table names, with the caller's deadline. While
// the shard has no live owner, or this instance is handing it over, the
// command waits (bounded by its context), woken when this instance starts
// serving or hands over a shard, when the table is read again, or when the
// membership is lost, and looking again every Config.Poll besides. An owner
// that answers "moved", or that cannot be reached at all (the command did
// not run), makes the table be read again; the entity layer then routes
// the command once more. Every other answer of the owner comes back as
// soon as it is given, its store's failures included: a write the owner's
// store may have applied is components.ErrOutcomeUnknown (a 504 at the
// edge, logged here), and is never routed again.
//
// # Handing a shard over
//
// Before the rebalancer releases a shard, [Host.BeforeRelease] stops
// admitting commands for it (they wait, then go to the new owner), and
// waits, at most DrainTimeout, for those in flight to finish. Entities of
// the shard keep their state in memory until their next command, which
// finds the shard no longer served and drops it, or until they are
// passivated; a write that slipped through is refused by the fence.
package entityhost
