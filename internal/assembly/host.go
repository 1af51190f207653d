package assembly

import (
	"context"
	"log/slog"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/consumers"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster/node"
	"github.com/trellis-go/trellis/internal/httpserver"
	"github.com/trellis-go/trellis/runtime"
	"github.com/trellis-go/trellis/timers"
	"github.com/trellis-go/trellis/views"
	"github.com/trellis-go/trellis/workflows"
)

// Host is what Build makes the service's parts into, and what
// trellis.Host is made of: it holds one by value, which Build fills.
type Host struct {
	// What trellis.Host shows the application in its exported fields of
	// the same names (Tracing's provider in trellis.Host.Tracing).
	System      *runtime.System
	Client      *components.Client
	Store       entities.Store
	Clock       clockwork.Clock
	Logger      *slog.Logger
	Redis       redis.UniversalClient
	Timers      *timers.Scheduler
	Metrics     *prometheus.Registry
	Idempotency api.IdempotencyStore
	Tracing     Tracing

	// What trellis.Host's methods reach.

	// Cluster routes entity commands to their shard's owner; nil when the
	// instance is not part of a cluster.
	Cluster entities.Cluster
	// Claims names this instance in its Idempotency-Key claims and tells
	// whether the instance another claim names is gone; nil without a
	// cluster (claims then only lapse).
	Claims ClaimHolders
	// Handovers carry the durable producers' sends to a queue's owner;
	// nil without a cluster transport.
	Handovers *Handovers
	// Shards are the shards this instance serves (every one without a
	// cluster).
	Shards node.ShardSet
	// Consumers runs the consumers setup starts.
	Consumers *consumers.Runner
	// Views runs the views setup starts.
	Views *views.Runner
	// Workflows are the runners of the workflows setup starts.
	Workflows workflows.Runners
	// Checks are the readiness checks: the cluster membership's, then
	// the application's (AddReadinessCheck).
	Checks *httpserver.Checks
}

// ClaimHolders is what names the holders of Idempotency-Key claims: the
// cluster's node.
type ClaimHolders interface {
	ClaimHolder() string
	HolderGone(ctx context.Context, holder string) bool
}
