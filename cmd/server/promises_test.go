package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/samples/contract"
	"github.com/trellis-go/trellis/samples/ordering"
	"github.com/trellis-go/trellis/trellistest"
)

// The requests of the promises test.
const (
	place    = "place"
	confirm  = "confirm"
	increase = "increase"
)

// answer is one request of the promises test and what it was answered.
type answer struct {
	op      string // place, confirm or increase
	key     string // its Idempotency-Key
	order   string // the order: confirmed, or placed (derived from key)
	counter string // the counter increased by 1
	status  int
	body    []byte
}

// promiseLoad bounds the promises test's load.
const (
	promiseWorkers    = 8
	promiseConfirms   = 300 // orders placed first, each confirmed at most once
	promiseMaxAnswers = 1500
	promiseFreezes    = 6 // freezes, each until promiseWorkers more failures
)

// flagRestarts is how many restarts of Redis follow the freezes.
var flagRestarts = flag.Int("promises.restarts", 2, "restarts of Redis (AOF, fsync always) after the freezes of TestFrozenStoreAnswersKeepPromises")

// TestFrozenStoreAnswersKeepPromises runs a small load of placements,
// confirms and counter increases, each with its own Idempotency-Key, on a service whose Redis
// (a redis-server of the test's own) is frozen with SIGSTOP mid-load and
// thawed, promiseFreezes times, then restarted -promises.restarts times (2; with
// an append-only file synced on every write, so that the restart loses
// nothing Redis acknowledged), and checks every answer's claim afterwards: each 503 left
// nothing changed (the order it would have placed does not exist, the
// order it would have confirmed is unconfirmed); each 504 (outcome
// unknown), retried with the same key, answers with the outcome, which is
// then there, and a further retry replays it; each 2xx's effect is there;
// and each worker's counter holds exactly the increases that took effect
// (2xx, or 504 then 2xx), none of those that answered 503.
// Every response goes through the contracts.
func TestFrozenStoreAnswersKeepPromises(t *testing.T) {
	trellistest.Long(t)
	rs := trellistest.StartRedisServer(t, "--appendonly", "yes", "--appendfsync", "always")
	ts := trellistest.Start(t, setup(&samples{orderExpiry: "1h"}),
		trellistest.WithRedisURL(rs.URL()+"?read_timeout=300ms&write_timeout=300ms&pool_timeout=500ms"),
		trellistest.WithStorePrefix("promises"),
		trellistest.WithConfig(func(c *trellis.Config) { c.AdminToken, c.RequestTimeout = outageToken, 2*time.Second }),
		trellistest.WithServiceOptions(trellis.WithContract(contract.Spec)))
	validateAgainstContracts(t, ts)
	targets := make([]string, promiseConfirms)
	for i := range targets {
		a := send(t, ts, answer{op: place, key: uuid.NewString()})
		if a.status != http.StatusCreated {
			t.Fatalf("placing the orders to confirm: %d %s", a.status, a.body)
		}
		targets[i] = a.order
	}

	var (
		mu       sync.Mutex
		answers  []answer
		next     atomic.Int64 // the next target to confirm
		received atomic.Int64
		failed   atomic.Int64 // answers that were not 2xx
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	for w := range promiseWorkers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				a := answer{op: []string{place, confirm, increase}[(i+w)%3], key: uuid.NewString(), counter: fmt.Sprint("promise-", w)}
				if a.op == confirm {
					if n := next.Add(1) - 1; n < promiseConfirms {
						a.order = targets[n]
					} else {
						a.op = place
					}
				}
				a = send(t, ts, a)
				if a.status >= 300 {
					failed.Add(1)
				}
				if a.op == increase && a.status == http.StatusGatewayTimeout {
					// A client retries an unknown outcome with its key.
					retryUntilDone(t, ts, a)
				}
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
				if received.Add(1) >= promiseMaxAnswers {
					return
				}
			}
		})
	}
	// Each freeze catches the requests in flight at some step: before
	// the key's claim, a read or the write (the outcome unknown).
	for range promiseFreezes {
		thawed := received.Load()
		trellistest.Eventually(t, 20*time.Second, "answers before the freeze", func() bool {
			return received.Load() >= min(thawed+30, promiseMaxAnswers)
		})
		failedBefore := failed.Load()
		rs.Freeze()
		trellistest.Eventually(t, 20*time.Second, "failures during the freeze", func() bool {
			return failed.Load() >= failedBefore+promiseWorkers || received.Load() >= promiseMaxAnswers
		})
		rs.Thaw()
	}
	// A restart refuses connections for a moment and cuts those in flight.
	for range *flagRestarts {
		before := received.Load()
		trellistest.Eventually(t, 20*time.Second, "answers before the restart", func() bool {
			return received.Load() >= min(before+30, promiseMaxAnswers)
		})
		rs.Restart()
	}
	after := received.Load()
	trellistest.Eventually(t, 20*time.Second, "answers after the restarts", func() bool {
		return received.Load() >= min(after+30, promiseMaxAnswers)
	})
	close(stop)
	wg.Wait()

	counts := map[int]int{}
	increases := map[string]int64{} // by counter, those that took effect
	for _, a := range answers {
		counts[a.status]++
		if checkPromise(t, ts, a) && a.op == increase {
			increases[a.counter]++
		}
	}
	// The increases that answered 503 did nothing; each that answered 2xx,
	// or 504 and then 2xx to its retry, did it once.
	for id, want := range increases {
		resp := read(t, ts, "/counters/"+id)
		var c contract.Counter
		if err := json.Unmarshal(resp.Body, &c); err != nil || c.Value != want {
			t.Errorf("counter %s: %d %s; want the value %d, one per increase that took effect", id, resp.Status, resp.Body, want)
		}
	}
	t.Logf("%d answers: %d 2xx, %d 503 (nothing changed: checked), %d 504 (unknown: retried with the key, one outcome: checked), other %v; counters %v",
		len(answers), counts[200]+counts[201], counts[503], counts[504], others(counts), increases)
	if counts[503]+counts[504] == 0 {
		t.Fatal("the freeze caused no 503 or 504: the test tested nothing")
	}
}

// checkPromise checks that what a was answered is true of the store now,
// and reports whether a took effect. An increase's effect is checked by
// its counter's value, once every answer is in.
func checkPromise(t *testing.T, ts *trellistest.Service, a answer) bool {
	t.Helper()
	switch a.status {
	case http.StatusOK, http.StatusCreated:
		checkEffect(t, ts, a, true)
		return true
	case http.StatusServiceUnavailable:
		checkEffect(t, ts, a, false)
		return false
	case http.StatusGatewayTimeout:
		var retry answer
		trellistest.Eventually(t, 15*time.Second, "a retry with the key that is not 409 (in flight)", func() bool {
			retry = send(t, ts, answer{op: a.op, key: a.key, order: a.order, counter: a.counter})
			return retry.status != http.StatusConflict
		})
		if retry.status != http.StatusOK && retry.status != http.StatusCreated {
			t.Errorf("retry of %+v after its 504: %d %s", a, retry.status, retry.body)
			return false
		}
		checkEffect(t, ts, retry, true)
		replayed := send(t, ts, answer{op: a.op, key: a.key, order: a.order, counter: a.counter})
		if replayed.status != retry.status || !bytes.Equal(replayed.body, retry.body) {
			t.Errorf("a second retry of %s: %d %s, want the retry's answer replayed", a.key, replayed.status, replayed.body)
		}
		return true
	}
	t.Errorf("%+v: status %d: %s", a, a.status, a.body)
	return false
}

// checkEffect checks that a's effect is there (done) or not (not done):
// the order placed, or confirmed.
func checkEffect(t *testing.T, ts *trellistest.Service, a answer, done bool) {
	t.Helper()
	if a.op == increase {
		return
	}
	resp := read(t, ts, "/orders/"+a.order)
	var o contract.Order
	_ = json.Unmarshal(resp.Body, &o)
	there := resp.Status == http.StatusOK && (a.op != confirm || o.Confirmed)
	if there != done {
		t.Errorf("answer %d to %s (key %s): the order is %d %s; its effect there = %v, want %v",
			a.status, a.op, a.key, resp.Status, resp.Body, there, done)
	}
}

// read GETs path as a client would that must know the state: again while
// the answer is 503 or 504 (the instance taking its shards back after
// Redis restarted), for up to 15 s. Those answers say nothing of the
// state, which is what the checks read.
func read(t *testing.T, ts *trellistest.Service, path string) *trellistest.Response {
	t.Helper()
	var resp *trellistest.Response
	trellistest.Eventually(t, 15*time.Second, "an answer to GET "+path+" other than 503 or 504", func() bool {
		r, err := ts.Call(context.Background(), http.MethodGet, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp = r
		return r.Status != http.StatusServiceUnavailable && r.Status != http.StatusGatewayTimeout
	})
	return resp
}

// send sends a's request with its key and returns a with the answer; a
// placement's order is the one its key names.
func send(t *testing.T, ts *trellistest.Service, a answer) answer {
	t.Helper()
	var path string
	var body []byte
	switch a.op {
	case place:
		path, body, a.order = "/orders", []byte(`{"item":"promise","quantity":1}`), ordering.IDForKey(a.key)
	case confirm:
		path = "/orders/" + a.order + "/confirm"
	case increase:
		path, body = "/counters/"+a.counter+"/increase", []byte(`{"by":1}`)
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, ts.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", api.ContentTypeJSON)
	req.Header.Set(api.HeaderIdempotencyKey, a.key)
	resp, err := ts.Send(req)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return a
	}
	a.status, a.body = resp.Status, resp.Body
	return a
}

// others are the counts of the statuses other than 200, 201, 503, 504.
func others(counts map[int]int) map[int]int {
	out := map[int]int{}
	for s, n := range counts {
		switch s {
		case 200, 201, 503, 504:
		default:
			out[s] = n
		}
	}
	return out
}

// retryUntilDone sends a again, with its key, until an answer says it was
// done (30 s at most, every 20 ms; a failure is reported with Errorf, as
// it runs on a worker's goroutine).
func retryUntilDone(t *testing.T, ts *trellistest.Service, a answer) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		if r := send(t, ts, a); r.status < 300 {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Errorf("%+v: no answer said done within 30 s of retries", a)
			return
		}
	}
}
