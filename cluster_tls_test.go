package trellis_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/internal/testkit/peertest"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/trellistest"
)

// TestClusterOverTLS: two instances whose cluster port speaks mutual TLS
// (certificates of one CA) form a cluster and forward to each other: a
// counter increased through both has one owner.
func TestClusterOverTLS(t *testing.T) {
	prefix := "trellis-test-tls-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	url := trellistest.RedisURL(t)
	client := trellistest.Redis(t)
	t.Cleanup(func() { testenv.DeleteKeys(t, client, prefix+":*") }) // registered first: runs after the instances stopped
	ca := peertest.NewCA(t, "cluster CA")
	app := &fixture.CounterApp{}
	var instances []*trellistest.Service
	for i := range 2 {
		files := ca.Issue(t, "trellis-"+strconv.Itoa(i))
		instances = append(instances, trellistest.Start(t, app.Setup, trellistest.WithRedisURL(url), trellistest.WithStorePrefix(prefix),
			trellistest.WithConfig(func(c *trellis.Config) {
				c.ClusterTLSCert, c.ClusterTLSKey, c.ClusterTLSCA = files.Cert, files.Key, files.CA
			})))
	}
	trellistest.WaitSettled(t, instances...)
	for i := range 20 {
		ts := instances[i%2]
		if c := fixture.Counter(t, ts.Post(t, "/counters/tls-"+strconv.Itoa(i%5)+"/increase", map[string]int{"by": 1})); c.Value != int64(i/5+1) {
			t.Fatalf("increase %d through instance %d: counter = %d, want %d", i+1, i%2, c.Value, i/5+1)
		}
	}
}
