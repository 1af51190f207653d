package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/lincheck"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// counterLoad is clients increasing and reading counters through a set
// of servers at random, each operation recorded in a history.
type counterLoad struct {
	h        *lincheck.History
	http     *http.Client
	answered atomic.Int64
	slowest  atomic.Int64 // nanoseconds
	stopped  atomic.Bool
	wg       sync.WaitGroup

	mu     sync.Mutex
	failed []error
}

// answerError is an answer other than a value: its status and body.
type answerError struct {
	status int
	what   string
}

func (e *answerError) Error() string { return e.what }

// startCounterLoad starts clients goroutines that each send increases by
// one (two in three) and reads of keys to one of servers at random until
// stop.
func startCounterLoad(t *testing.T, servers []*server, keys []string, clients int) *counterLoad {
	return startCounterLoadOn(t, func(rng *rand.Rand) (*server, func()) {
		return servers[rng.IntN(len(servers))], func() {}
	}, keys, clients)
}

// startCounterLoadOn is startCounterLoad with the server of each
// operation chosen by pick, which returns it and what to call once the
// operation is answered (a load balancer's choice and its bookkeeping).
func startCounterLoadOn(t *testing.T, pick func(*rand.Rand) (*server, func()), keys []string, clients int) *counterLoad {
	l := &counterLoad{h: lincheck.NewHistory(), http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}}
	t.Cleanup(l.stop)
	for c := range clients {
		l.wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))
			for !l.stopped.Load() {
				s, done := pick(rng)
				op := lincheck.CounterOp{Key: keys[rng.IntN(len(keys))], Read: rng.IntN(3) == 0}
				l.do(c, s, op)
				done()
			}
		})
	}
	return l
}

// do sends op to s and records it as client c's.
func (l *counterLoad) do(c int, s *server, op lincheck.CounterOp) lincheck.CounterResult {
	call, sent := l.h.Now(), time.Now()
	res, err := l.call(s, op)
	took := int64(time.Since(sent))
	for old := l.slowest.Load(); took > old && !l.slowest.CompareAndSwap(old, took); old = l.slowest.Load() {
	}
	l.answered.Add(1)
	if err != nil {
		l.mu.Lock()
		l.failed = append(l.failed, err)
		l.mu.Unlock()
	}
	l.h.Record(c, op, call, res, err)
	return res
}

// call sends op to s: an increase by one, or a read (404: never increased).
func (l *counterLoad) call(s *server, op lincheck.CounterOp) (lincheck.CounterResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	method, path, body := http.MethodPost, "/counters/"+op.Key+"/increase", `{"by":1}`
	if op.Read {
		method, path, body = http.MethodGet, "/counters/"+op.Key, ""
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, strings.NewReader(body))
	if err != nil {
		return lincheck.CounterResult{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := l.http.Do(req)
	if err != nil {
		return lincheck.CounterResult{}, fmt.Errorf("%s %s%s: %w", method, s.base, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	switch {
	case err != nil:
		return lincheck.CounterResult{}, fmt.Errorf("%s %s%s: read the answer: %w", method, s.base, path, err)
	case op.Read && resp.StatusCode == http.StatusNotFound:
		return lincheck.CounterResult{}, nil
	case resp.StatusCode != http.StatusOK:
		return lincheck.CounterResult{}, &answerError{status: resp.StatusCode,
			what: fmt.Sprintf("%s %s%s: status %d: %s", method, s.base, path, resp.StatusCode, b)}
	}
	var v struct{ Value int64 }
	if err := json.Unmarshal(b, &v); err != nil {
		return lincheck.CounterResult{}, fmt.Errorf("%s %s%s: %w: %s", method, s.base, path, err, b)
	}
	return lincheck.CounterResult{Value: v.Value}, nil
}

// await waits (at most two minutes) until n more operations have been
// answered or failed.
func (l *counterLoad) await(t *testing.T, n int64) {
	t.Helper()
	want := l.answered.Load() + n
	testenv.Eventually(t, 2*time.Minute, fmt.Sprintf("%d more answers", n), func() bool { return l.answered.Load() >= want })
}

// stop stops the clients and waits for them. It may be called more than
// once.
func (l *counterLoad) stop() {
	l.stopped.Store(true)
	l.wg.Wait()
	l.http.CloseIdleConnections()
}

// errors are the operations that failed so far.
func (l *counterLoad) errors() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.failed...)
}

// slowestAnswer is the longest any operation took so far.
func (l *counterLoad) slowestAnswer() time.Duration { return time.Duration(l.slowest.Load()) }
