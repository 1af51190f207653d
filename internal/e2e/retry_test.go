package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/internal/testkit/peertest"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// retryTimeout is the request timeout of the servers of the retry tests.
const retryTimeout = 3 * time.Second

// soloEnv is the environment of a server on its own (no cluster) on the
// Redis at redisURL, with the request timeout retryTimeout.
func soloEnv(redisURL string) []string {
	return []string{
		trellis.EnvHTTPAddr + "=127.0.0.1:0",
		trellis.EnvClusterAddr + "=off",
		trellis.EnvRedisURL + "=" + redisURL,
		trellis.EnvRequestTimeout + "=" + retryTimeout.String(),
		trellis.EnvLogLevel + "=info",
	}
}

// keyedAnswer is the answer to an increase made with an Idempotency-Key.
type keyedAnswer struct {
	status      int
	value       int64  // the counter's value, on a 200
	problemType string // the problem's type, on an error
	retryAfter  string
	body        string
}

// increaseWithKey increases counter id by one on s with the
// Idempotency-Key key.
func increaseWithKey(t *testing.T, s *server, id, key string) keyedAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/counters/"+id+"/increase", strings.NewReader(`{"by":1}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", api.ContentTypeJSON)
	req.Header.Set(api.HeaderIdempotencyKey, key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("increase %s with key %s: %v", id, key, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("increase %s with key %s: %v", id, key, err)
	}
	a := keyedAnswer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: string(b)}
	var v struct {
		Value int64
		Type  string
	}
	_ = json.Unmarshal(b, &v)
	a.value, a.problemType = v.Value, v.Type
	return a
}

// retryWithKey sends the increase with key until its answer is neither a
// 503 (nothing was done) nor a 409 of ProblemTypeInProgress, waiting as
// each Retry-After says, for at most limit; it returns the answer and how
// long the key was answered in progress.
func retryWithKey(t *testing.T, s *server, id, key string, limit time.Duration) (keyedAnswer, time.Duration) {
	t.Helper()
	began := time.Now()
	var inProgress time.Duration
	for {
		sent := time.Now()
		a := increaseWithKey(t, s, id, key)
		busy := a.status == http.StatusConflict && a.problemType == api.ProblemTypeInProgress
		if busy {
			inProgress += time.Since(sent)
		}
		if !busy && a.status != http.StatusServiceUnavailable {
			return a, inProgress
		}
		if time.Since(began) > limit {
			t.Fatalf("key %s: still %d after %v: %s", key, a.status, limit, a.body)
		}
		wait := 100 * time.Millisecond
		if secs, err := strconv.Atoi(a.retryAfter); err == nil {
			wait = min(time.Duration(secs)*time.Second, time.Second)
		}
		if busy {
			inProgress += wait
		}
		testenv.Recv(t, time.After(wait), 2*wait)
	}
}

// readCounter is counter id's value on s.
func readCounter(t *testing.T, s *server, id string) int64 {
	t.Helper()
	status, body := s.get("/counters/" + id)
	var v struct{ Value int64 }
	if status != http.StatusOK || json.Unmarshal([]byte(body), &v) != nil {
		t.Fatalf("GET counter %s: %d %s", id, status, body)
	}
	return v.Value
}

// TestBinaryRetryAfterLostAnswer: a server reaches Redis through a TCP
// proxy, which passes an increase made with an Idempotency-Key to Redis
// and loses Redis's answer: the increase takes effect and is answered
// 504, outcome unknown. Twenty other keyed increases follow; the same key
// again is answered with the first increase's answer, the one it was
// never told, and the counter was increased once by it.
func TestBinaryRetryAfterLostAnswer(t *testing.T) {
	testenv.Long(t)
	rs := testenv.StartRedisServer(t)
	proxy := peertest.NewProxy(t, rs.Addr())
	s := startServer(t, soloEnv(fmt.Sprintf("redis://%s/0?read_timeout=1s&write_timeout=1s", proxy.Addr())))
	const id = "lost-answer"
	if a := increaseWithKey(t, s, id, "before"); a.status != http.StatusOK || a.value != 1 {
		t.Fatalf("the first increase: %d %s", a.status, a.body)
	}

	// The marker is the counter's id, which the entity's write names and
	// the key's claim does not.
	proxy.AfterSent(id, nil)
	lost := increaseWithKey(t, s, id, "lost")
	proxy.Cut() // the service dials afresh
	if lost.status != http.StatusGatewayTimeout || lost.problemType != api.ProblemTypeOutcomeUnknown {
		t.Fatalf("the increase whose answer was lost: %d %s, want 504 of type %s", lost.status, lost.body, api.ProblemTypeOutcomeUnknown)
	}
	const others = 20
	for i := range others {
		a, _ := retryWithKey(t, s, id, fmt.Sprintf("other-%d", i), 30*time.Second)
		if a.status != http.StatusOK || a.value != int64(3+i) {
			t.Fatalf("increase %d after the lost answer: %d %s, want 200 with %d (the lost one took effect)", i, a.status, a.body, 3+i)
		}
	}
	again, inProgress := retryWithKey(t, s, id, "lost", 30*time.Second)
	if again.status != http.StatusOK || again.value != 2 {
		t.Errorf("the key of the lost answer again: %d %s, want 200 with 2 (the first answer)", again.status, again.body)
	}
	if inProgress > 0 {
		t.Errorf("the key of the lost answer was answered in progress for %v after its 504", inProgress)
	}
	if got, want := readCounter(t, s, id), int64(2+others); got != want {
		t.Errorf("the counter is %d, want %d: the lost increase applied once", got, want)
	}
	// The retry's answer is kept: once more, it is replayed.
	if a := increaseWithKey(t, s, id, "lost"); a.status != http.StatusOK || a.value != 2 {
		t.Errorf("the key once more: %d %s, want 200 with 2", a.status, a.body)
	}
}

// TestBinaryRetryRightAfter504: a server reaches Redis through a TCP
// proxy, which loses the answer to one of a keyed increase's writes to
// Redis: in each case another one. The retry of the key right after is
// not told "in progress" for longer than the store takes to answer again
// (the key's claim would otherwise hold until it lapses, the request
// timeout and some seconds after the first request began): it runs, and
// is answered as the increase was applied, once.
func TestBinaryRetryRightAfter504(t *testing.T) {
	testenv.Long(t)
	tests := []struct {
		name   string
		marker func(id, key string) string        // a byte string of the write whose answer is lost
		then   func(proxy *peertest.Proxy) func() // what else breaks, at once
		first  int                                // the first answer
	}{
		{
			// The increase takes effect, is answered 504, and its key
			// cannot be settled.
			name:   "the increase's answer lost, the store cut off",
			marker: func(id, _ string) string { return id }, // the entity's write names it, the claim does not
			then:   func(proxy *peertest.Proxy) func() { return func() { proxy.Refuse(true); proxy.Drop() } },
			first:  http.StatusGatewayTimeout,
		},
		{
			// The claim is made, and the increase does not run: 503.
			name:   "the key's claim's answer lost",
			marker: func(_, key string) string { return ":" + key }, // the claim's Redis key ends with it
			then:   func(*peertest.Proxy) func() { return nil },
			first:  http.StatusServiceUnavailable,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := testenv.StartRedisServer(t)
			proxy := peertest.NewProxy(t, rs.Addr())
			s := startServer(t, soloEnv(fmt.Sprintf("redis://%s/0?read_timeout=1s&write_timeout=1s", proxy.Addr())))
			const id, key = "right-after", "retried"
			if a := increaseWithKey(t, s, id, "before"); a.status != http.StatusOK || a.value != 1 {
				t.Fatalf("the first increase: %d %s", a.status, a.body)
			}
			proxy.AfterSent(tt.marker(id, key), tt.then(proxy))
			first := increaseWithKey(t, s, id, key)
			proxy.Refuse(false)
			proxy.Cut()
			answered := time.Now()
			if first.status != tt.first {
				t.Fatalf("the increase whose answer was lost: %d %s, want %d", first.status, first.body, tt.first)
			}
			again, inProgress := retryWithKey(t, s, id, key, 30*time.Second)
			t.Logf("the retry was answered %d %v after the %d (in progress for %v)",
				again.status, time.Since(answered).Round(time.Millisecond), first.status, inProgress)
			if again.status != http.StatusOK || again.value != 2 {
				t.Errorf("the retry: %d %s, want 200 with 2", again.status, again.body)
			}
			if limit := 2500 * time.Millisecond; inProgress > limit {
				t.Errorf("the key was answered in progress for %v after its %d, want at most %v", inProgress, first.status, limit)
			}
			if got := readCounter(t, s, id); got != 2 {
				t.Errorf("the counter is %d, want 2: the increase applied once", got)
			}
		})
	}
}
