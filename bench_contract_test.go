package trellis_test

import (
	"testing"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/samples/contract"
	"github.com/trellis-go/trellis/trellistest"
)

// BenchmarkHTTPEntityRoundTripContract: what validating every request
// against the service's contract (trellis.WithContract, the samples'
// contract: the counter id's pattern, the increase body's schema) costs
// on the whole stack's round trip (POST increase then GET, on Redis), as
// two instances that differ only in it take turns in the same run. It
// reports the CPU time per request of each and the difference as a share
// of the round trip without (contract-cost-pct), and the throughput ratio.
func BenchmarkHTTPEntityRoundTripContract(b *testing.B) {
	url := trellistest.RedisURL(b)
	alone := trellistest.WithConfig(func(c *trellis.Config) { c.ClusterAddr = trellis.ClusterOff })
	opts := []trellistest.Option{trellistest.WithRedisURL(url), alone}
	without := trellistest.Start(b, (&fixture.CounterApp{}).Setup, opts...)
	with := trellistest.Start(b, (&fixture.CounterApp{}).Setup, append(opts, trellistest.WithServiceOptions(trellis.WithContract(contract.Spec)))...)

	client := newLoadClient()
	b.Cleanup(client.Close)
	for _, base := range []string{without.URL, with.URL} {
		if _, err := runLoad(client, base, benchWorkers*4, false); err != nil {
			b.Fatal(err)
		}
	}
	off, on := takeTurns(b, client, [2]string{without.URL, with.URL}, false)
	b.ReportMetric(off.cpuPerReq(), "without-cpu-us/req")
	b.ReportMetric(on.cpuPerReq(), "with-cpu-us/req")
	b.ReportMetric((on.cpuPerReq()-off.cpuPerReq())/off.cpuPerReq()*100, "contract-cost-pct")
	b.ReportMetric(on.rps()/off.rps(), "x-without")
}
