package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// orderLoad is the order sample's clients at a steady rate, through a
// Service: each order is placed, read back, and every third one
// confirmed, each request sent to the next ready server.
type orderLoad struct {
	svc     *service
	http    *http.Client
	done    atomic.Int64 // orders whose requests were all answered or failed
	stopped chan struct{}
	wg      sync.WaitGroup

	mu     sync.Mutex
	orders []placedOrder
	failed []error
}

// placedOrder is an order the load placed, and whether it confirmed it.
type placedOrder struct {
	id        string
	confirmed bool
}

// orderWorkers bounds the orders in progress at once.
const orderWorkers = 8

// startOrderLoad starts placing rate orders a second through svc until
// stop (rate is a target: an order due while every worker waits on an
// answer is not sent).
func startOrderLoad(t *testing.T, svc *service, rate int) *orderLoad {
	l := &orderLoad{svc: svc, stopped: make(chan struct{}),
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: orderWorkers}}}
	t.Cleanup(l.stop)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	var next atomic.Int64
	for range orderWorkers {
		l.wg.Go(func() {
			for {
				select {
				case <-l.stopped:
					return
				case <-tick.C:
					l.order(int(next.Add(1)))
				}
			}
		})
	}
	t.Cleanup(tick.Stop)
	return l
}

// order places order n, reads it back and confirms it when n is a
// multiple of three, recording what failed.
func (l *orderLoad) order(n int) {
	defer l.done.Add(1)
	var o struct{ ID string }
	body := fmt.Sprintf(`{"item": "roll-%d", "quantity": 1}`, n)
	if err := l.send(http.MethodPost, "/orders", body, http.StatusCreated, &o); err != nil {
		l.fail(fmt.Errorf("place order %d: %w", n, err))
		return
	}
	placed := placedOrder{id: o.ID}
	defer func() {
		l.mu.Lock()
		l.orders = append(l.orders, placed)
		l.mu.Unlock()
	}()
	if err := l.send(http.MethodGet, "/orders/"+o.ID, "", http.StatusOK, nil); err != nil {
		l.fail(fmt.Errorf("read order %d: %w", n, err))
	}
	if n%3 == 0 {
		if err := l.send(http.MethodPost, "/orders/"+o.ID+"/confirm", "", http.StatusOK, nil); err != nil {
			l.fail(fmt.Errorf("confirm order %d: %w", n, err))
			return
		}
		placed.confirmed = true
	}
}

// send sends one request to the next ready server and decodes its JSON
// answer into v (when not nil); an answer other than want is an error.
func (l *orderLoad) send(method, path, body string, want int, v any) error {
	s, done := l.svc.pick()
	defer done()
	if s == nil {
		return errors.New("no ready endpoint")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := l.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s%s: %w", method, s.base, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	switch {
	case err != nil:
		return fmt.Errorf("%s %s%s: read the answer: %w", method, s.base, path, err)
	case resp.StatusCode != want:
		return fmt.Errorf("%s %s%s: status %d, want %d: %s", method, s.base, path, resp.StatusCode, want, b)
	case v != nil:
		if err := json.Unmarshal(b, v); err != nil {
			return fmt.Errorf("%s %s%s: %w: %s", method, s.base, path, err, b)
		}
	}
	return nil
}

func (l *orderLoad) fail(err error) {
	l.mu.Lock()
	l.failed = append(l.failed, err)
	l.mu.Unlock()
}

// await waits (at most two minutes) until n more orders are done.
func (l *orderLoad) await(t *testing.T, n int64) {
	t.Helper()
	want := l.done.Load() + n
	testenv.EventuallyEvery(t, 2*time.Minute, 10*time.Millisecond, fmt.Sprintf("%d more orders", n),
		func() bool { return l.done.Load() >= want })
}

// stop stops the load and waits for the orders in progress. It may be
// called more than once.
func (l *orderLoad) stop() {
	select {
	case <-l.stopped:
	default:
		close(l.stopped)
	}
	l.wg.Wait()
	l.http.CloseIdleConnections()
}

// results are the orders placed and the requests that failed so far.
func (l *orderLoad) results() ([]placedOrder, []error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]placedOrder(nil), l.orders...), append([]error(nil), l.failed...)
}
