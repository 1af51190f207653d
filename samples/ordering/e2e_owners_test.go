package ordering_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/trellis-go/trellis/samples/contract"
)

// TestE2EClusterKill9: the order sample on three instances that form one
// cluster. Orders are placed and confirmed through random instances, and
// one instance is killed with SIGKILL in the middle: its shards are served
// again by the others after its lease, every confirmed order stays
// confirmed and every other one expires.
func TestE2EClusterKill9(t *testing.T) {
	t.Parallel()
	cfg := newServerConfig(t, 4*time.Second)
	cfg.secret, cfg.lease = "e2e-cluster-"+fmt.Sprint(rand.Uint64())+"-0123456789abcdef", 2*time.Second
	servers := []*server{startServer(t, cfg), startServer(t, cfg), startServer(t, cfg)}
	c := newClient(t, cfg.adminToken)

	const n = 60
	orders := make([]contract.Order, n)
	var (
		mu   sync.Mutex
		live = servers
	)
	anyLive := func(rng *rand.Rand) *server {
		mu.Lock()
		defer mu.Unlock()
		return live[rng.IntN(len(live))]
	}
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	var killedAt time.Time
	var slowest time.Duration // the longest placement after the kill
	for i := range orders {
		if i == n/2 {
			// The victim owns about a third of the shards, so of the
			// orders placed so far too.
			servers[0].kill9()
			killedAt = time.Now()
			mu.Lock()
			live = servers[1:]
			mu.Unlock()
		}
		began := time.Now()
		orders[i] = place(t, c, anyLive(rng).base, fmt.Sprintf("kill9-%d", i), i+1)
		if !killedAt.IsZero() {
			slowest = max(slowest, time.Since(began))
		}
		if i%3 == 0 {
			if r := c.do(http.MethodPost, anyLive(rng).base+"/orders/"+orders[i].Id+"/confirm", ""); r == nil || r.status != http.StatusOK {
				t.Fatalf("confirm %d: %v", i, r)
			}
			orders[i].Confirmed = true
		}
	}
	t.Logf("placed and confirmed every order; the last %d after the kill (lease %v), done %v after it; the slowest placement took %v",
		n/2, cfg.lease, time.Since(killedAt).Round(time.Millisecond), slowest.Round(time.Millisecond))

	// A timer the killed instance had claimed runs again when its claim's
	// lease ends (30 s), hence the lease in the bound.
	eventually(t, cfg.expiry+30*time.Second+fireMargin, "every timer has run", func() (bool, string) {
		active, detail := activeTimers(c, live[0].base)
		return active == 0, detail
	})
	for i, o := range orders {
		for _, s := range live {
			status, body := getOrder(c, s.base, o.Id)
			switch {
			case o.Confirmed && (status != http.StatusOK || !body.Confirmed):
				t.Errorf("confirmed order %d on %s: %d %+v, want 200 confirmed", i, s.base, status, body)
			case !o.Confirmed && status != http.StatusNotFound:
				raw, _ := json.Marshal(body)
				t.Errorf("unconfirmed order %d on %s: %d %s, want 404 (expired)", i, s.base, status, raw)
			}
		}
	}
}

// TestE2EClusterLinearizableKill9: three server processes as one cluster;
// clients increase and read three hot counters through the live ones at
// random, while one process is killed with SIGKILL and later started
// again. Porcupine checks the recorded history: every answer is explained
// by one order of the operations (an operation without an answer may or
// may not have taken effect).
func TestE2EClusterLinearizableKill9(t *testing.T) {
	t.Parallel()
	cfg := newServerConfig(t, time.Minute)
	cfg.secret, cfg.lease = "e2e-cluster-"+fmt.Sprint(rand.Uint64())+"-0123456789abcdef", 2*time.Second
	servers := []*server{startServer(t, cfg), startServer(t, cfg), startServer(t, cfg)}
	c := newClient(t, cfg.adminToken)

	var (
		mu   sync.Mutex
		live = servers
		stop atomic.Bool
		wg   sync.WaitGroup
	)
	anyLive := func(rng *rand.Rand) *server {
		mu.Lock()
		defer mu.Unlock()
		return live[rng.IntN(len(live))]
	}
	keys := []string{"lin-a", "lin-b", "lin-c"}
	h := &opHistory{start: time.Now()}
	var failed atomic.Int64
	for client := range 6 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(client), uint64(time.Now().UnixNano())))
			for !stop.Load() {
				op := counterInput{key: keys[rng.IntN(len(keys))], read: rng.IntN(3) == 0}
				call := h.now()
				res, err := counterOp(c, anyLive(rng).base, op)
				if err != nil {
					failed.Add(1)
				}
				h.record(client, op, call, res, err)
			}
		})
	}
	// The load runs a while, loses an instance, runs on the others, gets
	// it back and runs on all three; each phase until some operations more
	// were recorded.
	phase := func(what string) {
		from := h.len()
		eventually(t, 30*time.Second, what, func() (bool, string) {
			return h.len() >= from+300, fmt.Sprint(h.len()-from, " operations")
		})
	}
	phase("load on three instances")
	mu.Lock()
	victim := live[0]
	live = live[1:]
	mu.Unlock()
	victim.kill9()
	phase("load on the two left")
	again := startServer(t, cfg)
	mu.Lock()
	live = append(live, again)
	mu.Unlock()
	phase("load with the restarted instance")
	stop.Store(true)
	wg.Wait()
	t.Logf("%d operations, %d without an answer", h.len(), failed.Load())
	switch res := porcupine.CheckOperationsTimeout(counterModel, h.ops, time.Minute); res {
	case porcupine.Ok:
		t.Logf("linearizable: %d operations", h.len())
	case porcupine.Illegal:
		t.Errorf("not linearizable: %d operations", h.len())
	default:
		t.Errorf("linearizability unknown: the check of %d operations timed out", h.len())
	}
}

// counterOp sends op to the server at base.
func counterOp(c *client, base string, op counterInput) (counterOutput, error) {
	method, url, body := http.MethodPost, base+"/counters/"+op.key+"/increase", `{"by":1}`
	if op.read {
		method, url, body = http.MethodGet, base+"/counters/"+op.key, ""
	}
	r := c.try(method, url, body)
	switch {
	case r == nil:
		return counterOutput{}, fmt.Errorf("%s %s: no response", method, url)
	case op.read && r.status == http.StatusNotFound:
		return counterOutput{value: 0}, nil // never increased yet
	case r.status != http.StatusOK:
		return counterOutput{}, fmt.Errorf("%s %s: %v", method, url, r)
	}
	var v contract.Counter
	if err := json.Unmarshal(r.body, &v); err != nil {
		return counterOutput{}, fmt.Errorf("%s %s: %w", method, url, err)
	}
	return counterOutput{value: v.Value}, nil
}

// The linearizability model of the counters, as a service's own test
// writes it with porcupine: a register per counter that an increase adds
// one to; an operation without an answer may have taken effect or not.
type (
	counterInput struct {
		key  string
		read bool
	}
	counterOutput struct {
		value   int64
		unknown bool
	}
)

var counterModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string]int{}
		var out [][]porcupine.Operation
		for _, op := range history {
			k := op.Input.(counterInput).key
			i, ok := byKey[k]
			if !ok {
				i = len(out)
				byKey[k] = i
				out = append(out, nil)
			}
			out[i] = append(out[i], op)
		}
		return out
	},
	Init: func() any { return int64(0) },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(int64), input.(counterInput), output.(counterOutput)
		if in.read {
			return out.unknown || out.value == s, s
		}
		return out.unknown || out.value == s+1, s + 1
	},
}

// opHistory records the operations of many clients.
type opHistory struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
}

func (h *opHistory) now() int64 { return int64(time.Since(h.start)) }

func (h *opHistory) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// record adds an operation called at call: its output, or, when err is
// not nil, an unknown output that ends at infinity.
func (h *opHistory) record(client int, in counterInput, call int64, out counterOutput, err error) {
	ret := h.now()
	if err != nil {
		out, ret = counterOutput{unknown: true}, math.MaxInt64
	}
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	h.mu.Unlock()
}
