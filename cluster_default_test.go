package trellis_test

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/trellistest"
)

// TestClusterByDefaultSharesASecret: two instances on one Redis and
// prefix, given no cluster secret, form a cluster (the secret the first
// kept in Redis signs their messages): each serves part of the shards,
// and a counter increased through both has one owner.
func TestClusterByDefaultSharesASecret(t *testing.T) {
	prefix := "trellis-test-default-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	url := trellistest.RedisURL(t)
	client := trellistest.Redis(t)
	t.Cleanup(func() { testenv.DeleteKeys(t, client, prefix+":*") }) // registered first: runs after the instances stopped
	app := &fixture.CounterApp{}
	var instances []*trellistest.Service
	for range 2 {
		instances = append(instances, trellistest.Start(t, app.Setup, trellistest.WithRedisURL(url), trellistest.WithStorePrefix(prefix),
			trellistest.WithConfig(func(c *trellis.Config) {
				if c.ClusterSecret != "" {
					t.Fatalf("the test kit set a cluster secret")
				}
			})))
	}
	trellistest.WaitSettled(t, instances...)
	for i := range 20 {
		ts := instances[i%2]
		if c := fixture.Counter(t, ts.Post(t, "/counters/shared/increase", map[string]int{"by": 1})); c.Value != int64(i+1) {
			t.Fatalf("increase %d through instance %d: counter = %d, want %d", i+1, i%2, c.Value, i+1)
		}
	}
}

// TestClusterJoinsOnceRedisAnswers: an instance whose Redis does not
// answer at start starts unready ("not a member of the cluster yet"),
// answers an entity command 503, and joins once Redis answers.
func TestClusterJoinsOnceRedisAnswers(t *testing.T) {
	testenv.Long(t)
	t.Cleanup(func() { testenv.WaitGoroutinesGone(t, "(*ConnPool).tryDial") }) // dials that failed before Redis answered
	port := trellistest.FreePort(t)
	url := "redis://127.0.0.1:" + strconv.Itoa(port) + "/0"
	app := &fixture.CounterApp{}
	ts := trellistest.Start(t, app.Setup, trellistest.WithRedisURL(url), trellistest.WithStorePrefix("joins-late"))
	if resp := ts.Get(t, "/readyz"); resp.Status != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before Redis answers = %d %s, want 503", resp.Status, resp.Body)
	}
	if resp := ts.Post(t, "/counters/late/increase", map[string]int{"by": 1}); resp.Status != http.StatusServiceUnavailable {
		t.Fatalf("increase before Redis answers = %d %s, want 503", resp.Status, resp.Body)
	}
	trellistest.StartRedisServerOn(t, port) // the keys die with the server
	trellistest.Eventually(t, 30*time.Second, "the instance to join and be ready", func() bool {
		return ts.Get(t, "/readyz").Status == http.StatusOK && ts.ShardsServed() == 256
	})
	if c := fixture.Counter(t, ts.Post(t, "/counters/late/increase", map[string]int{"by": 1})); c.Value != 1 {
		t.Fatalf("counter = %d after joining, want 1", c.Value)
	}
}

// TestClusterPortTakenFailsStart: a cluster port already in use is a
// start-up error naming the setting, not Redis's absence: the instance
// does not start (instead of starting unready and trying to join again).
func TestClusterPortTakenFailsStart(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := trellis.DefaultConfig()
	cfg.HTTPAddr, cfg.RedisURL = "127.0.0.1:0", trellistest.RedisURL(t)
	cfg.RedisPrefix = "trellis-test-port-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	cfg.ClusterAddr = taken.Addr().String()
	svc, err := trellis.New(cfg, (&fixture.CounterApp{}).Setup)
	if err == nil {
		_ = svc.Shutdown(t.Context())
		t.Fatal("New with the cluster port taken: no error")
	}
	if !strings.Contains(err.Error(), trellis.EnvClusterAddr) || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("New with the cluster port taken: %v, want it to name %s and the cause", err, trellis.EnvClusterAddr)
	}
}
