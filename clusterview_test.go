package trellis_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/api"
	adminapi "github.com/trellis-go/trellis/api/admin"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/internal/testkit/peertest"
	"github.com/trellis-go/trellis/trellistest"
)

// TestClusterOperatorView: three instances of a cluster, each asked
// through the admin API (every answer checked against the contract) and
// /metrics: each lists the same three members, alive, with recent
// heartbeats and itself marked; their shards add up to 256, each within
// 10 % of an even share, all served by their preferred owner; the shard
// list agrees. Once one instance stops gracefully it is gone from the
// list at once, and the two others share the 256 shards.
func TestClusterOperatorView(t *testing.T) {
	instances := fixture.StartCluster(t, 3)
	for _, ts := range instances {
		ts.HTTP.Transport = trellistest.CheckContracts(t, ts.HTTP.Transport, api.Spec)
	}
	lease := instances[0].Host().Config.ClusterLease

	var selves []string
	for i, ts := range instances {
		c := settledView(t, ts, 3)
		selves = append(selves, c.Self)
		for _, m := range c.Members {
			if m.Self != (m.Id == c.Self) {
				t.Errorf("instance %d: member %s marked self=%v, self is %s", i, m.Id, m.Self, c.Self)
			}
			checkHeartbeat(t, c, m, lease)
		}
		trellistest.Eventually(t, lease, "trellis_cluster_members to be 3", func() bool {
			return metricValue(t, ts, "trellis_cluster_members") == 3
		})
		if age := metricValue(t, ts, "trellis_cluster_heartbeat_age_seconds"); age < 0 || age > (lease/3+time.Second).Seconds() {
			t.Errorf("instance %d: trellis_cluster_heartbeat_age_seconds = %v, want within a renewal interval (%v)", i, age, lease/3)
		}
	}
	slices.Sort(selves)
	if len(slices.Compact(selves)) != 3 {
		t.Errorf("the instances call themselves %v, want three ids", selves)
	}
	checkShardList(t, instances[1], selves)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gone := getCluster(t, instances[2]).Self
	if err := instances[2].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c := getCluster(t, instances[0])
	for _, m := range c.Members {
		if m.Id == gone {
			t.Errorf("the instance that left is still listed: %+v", m)
		}
	}
	trellistest.WaitSettled(t, instances[:2]...)
	settledView(t, instances[0], 2)
	trellistest.Eventually(t, lease, "trellis_cluster_members to be 2", func() bool {
		return metricValue(t, instances[1], "trellis_cluster_members") == 2
	})
}

// adminGet is GET path on ts with the admin token, decoded into v; it
// fails the test unless the answer is 200.
func adminGet(t *testing.T, ts *trellistest.Service, path string, v any) {
	t.Helper()
	resp := fixture.Admin(t, ts, http.MethodGet, path)
	if resp.Status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.Status, resp.Body)
	}
	resp.JSON(t, v)
}

// getCluster is GET /admin/cluster on ts, which must be in a cluster.
func getCluster(t *testing.T, ts *trellistest.Service) adminapi.Cluster {
	t.Helper()
	var c adminapi.Cluster
	if adminGet(t, ts, "/admin/cluster", &c); !c.Enabled {
		t.Fatal("GET /admin/cluster: not enabled")
	}
	return c
}

// settledView waits (bounded) until ts shows n alive members owning
// every shard by their preferred owners, and checks each holds its share
// within 10 %.
func settledView(t *testing.T, ts *trellistest.Service, n int) adminapi.Cluster {
	t.Helper()
	var c adminapi.Cluster
	trellistest.Eventually(t, 30*time.Second, "every shard served by its preferred owner", func() bool {
		c = getCluster(t, ts)
		return len(c.Members) == n && c.Shards.Served == cluster.NumShards
	})
	want := adminapi.ShardCounts{Total: cluster.NumShards, Owned: cluster.NumShards, Served: cluster.NumShards}
	if c.Shards != want {
		t.Errorf("shard counts %+v, want %+v", c.Shards, want)
	}
	share := float64(cluster.NumShards) / float64(n)
	sum := 0
	for _, m := range c.Members {
		sum += m.Shards
		if m.Status != adminapi.Alive || float64(m.Shards) < share*0.9 || float64(m.Shards) > share*1.1 {
			t.Errorf("member %s: %s with %d shards, want alive with %.1f ± 10 %%", m.Id, m.Status, m.Shards, share)
		}
	}
	if sum != cluster.NumShards {
		t.Errorf("the members' shards add up to %d, want %d", sum, cluster.NumShards)
	}
	return c
}

// checkHeartbeat checks a live member's times against Redis's now: it
// joined before its last heartbeat, which is at most a renewal interval
// (plus a second of slack) old and its age; its lease ends after now and
// within a lease.
func checkHeartbeat(t *testing.T, c adminapi.Cluster, m adminapi.ClusterMember, lease time.Duration) {
	t.Helper()
	if m.HeartbeatAgeMs == nil {
		t.Fatalf("member %s has no heartbeat age", m.Id)
	}
	age := time.Duration(*m.HeartbeatAgeMs) * time.Millisecond
	switch {
	case m.JoinedAt.IsZero() || m.JoinedAt.After(m.HeartbeatAt):
		t.Errorf("member %s joined %v, last heartbeat %v", m.Id, m.JoinedAt, m.HeartbeatAt)
	case age > lease/3+time.Second || c.Now.Sub(m.HeartbeatAt) != age:
		t.Errorf("member %s: heartbeat %v, %v before %v", m.Id, m.HeartbeatAt, age, c.Now)
	case !m.LeaseExpiresAt.After(c.Now) || m.LeaseExpiresAt.Sub(c.Now) > lease:
		t.Errorf("member %s: lease expires %v, now %v", m.Id, m.LeaseExpiresAt, c.Now)
	}
}

// checkShardList checks GET /admin/cluster/shards on ts: every shard in
// order, owned by one of members at an epoch of at least 1, served, and
// preferred by its owner.
func checkShardList(t *testing.T, ts *trellistest.Service, members []string) {
	t.Helper()
	var list adminapi.ClusterShards
	if adminGet(t, ts, "/admin/cluster/shards", &list); !list.Enabled || len(list.Shards) != cluster.NumShards {
		t.Fatalf("GET /admin/cluster/shards: enabled %v, %d shards", list.Enabled, len(list.Shards))
	}
	for i, s := range list.Shards {
		if s.Shard != i || !slices.Contains(members, s.Owner) || s.Epoch < 1 || s.State != adminapi.Served || s.Preferred != s.Owner {
			t.Errorf("shard %d: %+v", i, s)
		}
	}
}

// TestClusterViewWhileRedisIsDown: while the cluster's Redis does not
// answer, both cluster routes answer 503 with Retry-After, as the
// contract says; once it is back (empty: the instance joins again) they
// answer 200.
func TestClusterViewWhileRedisIsDown(t *testing.T) {
	trellistest.Long(t)
	rs := trellistest.StartRedisServer(t)
	ts := fixture.StartCluster(t, 1, trellistest.WithRedisURL(rs.URL()),
		trellistest.WithConfig(func(c *trellis.Config) { c.ClusterLease = time.Second }))[0]
	ts.HTTP.Transport = trellistest.CheckContracts(t, ts.HTTP.Transport, api.Spec)
	rs.Stop()
	for _, path := range []string{"/admin/cluster", "/admin/cluster/shards"} {
		resp := fixture.Admin(t, ts, http.MethodGet, path)
		if resp.Status != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("GET %s with Redis down: %d (Retry-After %q) %s, want 503 with Retry-After",
				path, resp.Status, resp.Header.Get("Retry-After"), resp.Body)
		}
	}
	rs.Restart()
	// The instance finds its membership gone, joins again and takes every
	// shard: then it can leave cleanly when the test ends.
	settledView(t, ts, 1)
}

// TestClusterLapsedMember: of two instances, B reaches Redis through a
// proxy, which then refuses and cuts its connections (a partition from
// Redis alone). B's own trellis_cluster_heartbeat_age_seconds grows past a
// third of the lease; A's admin view shows B alive until its lease
// expires, then lapsed with orphaned shards or already gone, and soon
// gone with A serving all 256. Once the proxy carries again, B joins again
// and the two share the shards.
func TestClusterLapsedMember(t *testing.T) {
	trellistest.Long(t)
	shortLease := trellistest.WithConfig(func(c *trellis.Config) { c.ClusterLease = time.Second })
	a := fixture.StartCluster(t, 1, shortLease)[0]
	direct, err := url.Parse(a.Host().Config.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := peertest.NewProxy(t, direct.Host) // before B: B stops before it closes
	viaProxy := *direct
	viaProxy.Host = proxy.Addr()
	b := trellistest.StartInstances(t, 1, fixture.App, shortLease,
		trellistest.WithLogger(slog.New(slog.DiscardHandler)),
		trellistest.WithRedisURL(viaProxy.String()), trellistest.WithStorePrefix(a.Host().Config.RedisPrefix),
		trellistest.WithConfig(func(c *trellis.Config) {
			c.AdminToken = fixture.AdminToken
			c.ClusterSecret = a.Host().Config.ClusterSecret
		}))[0]
	trellistest.WaitSettled(t, a, b)
	idB := getCluster(t, b).Self

	proxy.Refuse(true)
	proxy.Cut()
	trellistest.Eventually(t, 5*time.Second, "B's heartbeat age past a third of the lease", func() bool {
		return metricValue(t, b, "trellis_cluster_heartbeat_age_seconds") > (time.Second / 3).Seconds()
	})
	seen := map[adminapi.ClusterMemberStatus]bool{}
	trellistest.Eventually(t, 10*time.Second, "B gone from A's view", func() bool {
		c := getCluster(t, a)
		for _, m := range c.Members {
			if m.Id != idB {
				continue
			}
			seen[m.Status] = true
			if m.Status == adminapi.Lapsed && (m.Shards == 0 || c.Shards.Orphaned < m.Shards || m.HeartbeatAgeMs != nil || m.Addr != "") {
				t.Errorf("lapsed B: %+v with %d orphaned shards: want its orphaned shards, no heartbeat, no address", m, c.Shards.Orphaned)
			}
			return false
		}
		return true
	})
	t.Logf("A saw B as %v before it was gone", seen)
	if seen[adminapi.Leaving] {
		t.Error("B was shown as leaving: it did not leave, it lapsed")
	}
	settledView(t, a, 1)

	proxy.Refuse(false)
	trellistest.WaitSettled(t, a, b)
	settledView(t, a, 2)
}
