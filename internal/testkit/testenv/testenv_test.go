package testenv

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain stops the shared servers the tests started, and checks that
// none is left running.
func TestMain(m *testing.M) {
	code := Servers(m).Run()
	for _, r := range []*RedisServer{shared.redis} {
		if r != nil && r.cmd != nil {
			fmt.Fprintln(os.Stderr, "testenv: the shared redis-server is still running")
			code = 1
		}
	}
	if c := shared.cluster; c != nil {
		for _, n := range c.nodes {
			select {
			case <-n.done:
			default:
				fmt.Fprintln(os.Stderr, "testenv: a node of the shared cluster is still running:", n.addr)
				code = 1
			}
		}
	}
	os.Exit(code)
}

// TestRedis proves the test command's Redis plumbing: the URL is set, the
// server answers PING, and a SET/GET round trip works.
func TestRedis(t *testing.T) {
	client := Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	pong, err := client.Ping(ctx).Result()
	if err != nil {
		t.Fatalf("PING: %v", err)
	}
	if pong != "PONG" {
		t.Fatalf("PING = %q, want %q", pong, "PONG")
	}

	key := "trellis:testenv:" + rand.Text()
	const value = "hello"
	t.Cleanup(func() {
		if err := client.Del(context.Background(), key).Err(); err != nil {
			t.Errorf("DEL %s: %v", key, err)
		}
	})
	if err := client.Set(ctx, key, value, time.Minute).Err(); err != nil {
		t.Fatalf("SET %s: %v", key, err)
	}
	got, err := client.Get(ctx, key).Result()
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	if got != value {
		t.Fatalf("GET %s = %q, want %q", key, got, value)
	}
}

// TestRedisCluster proves the cluster plumbing: every master answers, the
// cluster has 3 masters that cover every slot, each with a replica, and
// keys in different slots can be written and read through one client.
func TestRedisCluster(t *testing.T) {
	client := RedisCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	info, err := client.ClusterInfo(ctx).Result()
	if err != nil {
		t.Fatalf("CLUSTER INFO: %v", err)
	}
	for _, want := range []string{"cluster_state:ok", "cluster_slots_ok:16384", "cluster_size:3"} {
		if !strings.Contains(info, want) {
			t.Errorf("CLUSTER INFO lacks %q:\n%s", want, info)
		}
	}
	shards, err := client.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatalf("CLUSTER SHARDS: %v", err)
	}
	for _, s := range shards {
		if len(s.Nodes) != 2 {
			t.Errorf("shard %v has %d nodes, want a master and a replica", s.Slots, len(s.Nodes))
		}
	}

	base := "trellis:testenv:" + rand.Text()
	keys := []string{base + ":a", base + ":b", base + ":c", base + ":d"}
	t.Cleanup(func() { DeleteKeys(t, client, base+":*") })
	for _, k := range keys {
		if err := client.Set(ctx, k, k, time.Minute).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	for _, k := range keys {
		if got, err := client.Get(ctx, k).Result(); err != nil || got != k {
			t.Fatalf("GET %s = %q, %v", k, got, err)
		}
	}
}

// TestDeleteKeys: DeleteKeys removes every matching key, on one Redis and
// on every master of the cluster, and nothing else.
func TestDeleteKeys(t *testing.T) {
	for _, target := range RedisTargets {
		t.Run(target.Name, func(t *testing.T) {
			client := target.Connect(t)
			ctx := t.Context()
			base := "trellis:testenv:" + rand.Text()
			keep := base + "-kept"
			t.Cleanup(func() { client.Del(context.Background(), keep) })
			for i := range 50 {
				if err := client.Set(ctx, base+":"+strconv.Itoa(i), "x", time.Minute).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if err := client.Set(ctx, keep, "x", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			DeleteKeys(t, client, base+":*")
			for i := range 50 {
				if n, err := client.Exists(ctx, base+":"+strconv.Itoa(i)).Result(); err != nil || n != 0 {
					t.Fatalf("key %d: exists %d, %v after DeleteKeys", i, n, err)
				}
			}
			if n, err := client.Exists(ctx, keep).Result(); err != nil || n != 1 {
				t.Fatalf("a key outside the pattern: exists %d, %v", n, err)
			}
		})
	}
}

// TestStartClusterFailover: a cluster of the test's own has 3 masters with
// a replica each, serves keys in every slot, and when a master is killed
// with SIGKILL its replica is promoted and the keys are served again.
func TestStartClusterFailover(t *testing.T) {
	c := StartCluster(t)
	roles, err := c.Roles("")
	if err != nil {
		t.Fatal(err)
	}
	masters, replicaOf := 0, map[string]string{}
	for _, r := range roles {
		if r.Master {
			masters++
		} else {
			replicaOf[r.Of] = r.Addr
		}
	}
	if masters != 3 || len(replicaOf) != 3 {
		t.Fatalf("roles %+v: want 3 masters with a replica each", roles)
	}
	client := c.Client(t)
	ctx := t.Context()
	for i := range 30 {
		if err := client.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitReplicated(t)
	var victim string
	for m := range replicaOf {
		victim = m
		break
	}
	c.Kill9(victim)
	Eventually(t, NodeTimeout+20*time.Second, "the replica of "+victim+" to be promoted", func() bool {
		roles, err := c.Roles(victim)
		if err != nil {
			return false
		}
		for _, r := range roles {
			if r.Addr == replicaOf[victim] && r.Master {
				return true
			}
		}
		return false
	})
	Eventually(t, 15*time.Second, "every key to be served again", func() bool {
		for i := range 30 {
			ctx, cancel := context.WithTimeout(ctx, time.Second)
			err := client.Get(ctx, "k"+strconv.Itoa(i)).Err()
			cancel()
			if err != nil {
				return false
			}
		}
		return true
	})
}
