package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/samples/ordering"
)

// auditConsumer is the consumer name under which a test keeps the
// shards' change logs whole: a log is trimmed to its slowest consumer's
// checkpoint, and this one's never moves.
const auditConsumer = "e2e-audit"

// changeAudit reads every write committed to the service's entities since
// it started, from the shards' change logs: each write appends its change
// in the same atomic step as the state, so the log is what was applied,
// once per application.
type changeAudit struct {
	log  *entities.ShardedRedisStore
	from [cluster.NumShards]uint64
}

// startChangeAudit registers the audit on every shard of the service on
// rdb (the default key prefix), before the writes it is to see.
func startChangeAudit(t *testing.T, rdb redis.UniversalClient) *changeAudit {
	t.Helper()
	a := &changeAudit{log: entities.NewShardedRedisStore(rdb, "")}
	for shard := range cluster.NumShards {
		cp, err := a.log.Register(context.Background(), auditConsumer, shard)
		if err != nil {
			t.Fatal(err)
		}
		a.from[shard] = cp
	}
	return a
}

// orderWrites is each order's writes since the audit started, in order,
// each named by what it did: "placed", "confirmed" or "deleted".
func (a *changeAudit) orderWrites(t *testing.T) map[string][]string {
	t.Helper()
	writes := map[string][]string{}
	for shard := range cluster.NumShards {
		after := a.from[shard]
		for {
			changes, head, missed, err := a.log.Changes(context.Background(), shard, after, 500)
			if err != nil {
				t.Fatal(err)
			}
			if missed {
				t.Fatalf("shard %d: changes after %d were trimmed from the log: the audit is incomplete", shard, after)
			}
			for _, c := range changes {
				after = c.Seq
				if c.EntityType == ordering.Orders.ComponentID() {
					writes[c.EntityID] = append(writes[c.EntityID], orderWrite(t, c))
				}
			}
			if len(changes) == 0 || after >= head {
				break
			}
		}
	}
	return writes
}

// orderWrite names what a change of an order did.
func orderWrite(t *testing.T, c entities.Change) string {
	t.Helper()
	if c.Deleted {
		return "deleted"
	}
	o, err := ordering.Orders.Decode(c.EntityID, c.Revision, c.Data)
	switch {
	case err != nil:
		t.Fatalf("order %s: %v", c.EntityID, err)
	case o.Confirmed:
		return "confirmed"
	case o.Placed:
		return "placed"
	}
	return "other"
}

// checkOrderWrites checks that each order placed was written as its
// client and its timer should have: placed, then confirmed (its timer
// deleted, so never expired), or placed, then deleted once by its
// expiry (the load cancels none); and that no other order was written.
func checkOrderWrites(t *testing.T, placed []placedOrder, writes map[string][]string) {
	t.Helper()
	bad := 0
	for _, o := range placed {
		want := []string{"placed", "deleted"}
		if o.confirmed {
			want = []string{"placed", "confirmed"}
		}
		if got := writes[o.id]; !slices.Equal(got, want) {
			if bad++; bad <= 10 {
				t.Errorf("order %s (confirmed %v): written %s, want %s", o.id, o.confirmed,
					strings.Join(got, ", "), strings.Join(want, ", "))
			}
		}
		delete(writes, o.id)
	}
	for id, w := range writes {
		if bad++; bad <= 10 {
			t.Errorf("order %s, which no client placed, was written: %s", id, strings.Join(w, ", "))
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d orders written otherwise than placed and confirmed or expired once", bad, len(placed))
	}
}
