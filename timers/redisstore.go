package timers

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
)

// DefaultRedisPrefix is the key prefix [NewRedisStore] uses when given "".
const DefaultRedisPrefix = "trellis"

// RedisStore keeps timers in Redis, shared by every scheduler (instance)
// on the same Redis and prefix. It is as durable as the Redis server: run
// Redis with AOF (appendonly yes) so that a restart loses nothing, and a
// wipe is detected (see [WipedError]).
//
// # Key layout
//
//	<prefix>:timers:due         sorted set: name → next run (due time, or lease expiry while claimed), ms
//	<prefix>:timers:data        hash: name → record (see redisscripts.go)
//	<prefix>:timers:failing     set: names whose last call failed (for Stats and the failing filter)
//	<prefix>:timers:generation  string: the last generation handed out (INCR)
//	<prefix>:timers:marker      string: written when a scheduler starts; its loss means a wipe
//	<prefix>:timers:wake        pub/sub channel: "a new earliest timer", for sleeping loops
//
// Two structures per timer, one entry in each, and no key per timer: a key
// costs Redis ~70 bytes of its own, and the 50,000-timer target is ≤ 1,400
// bytes per pending 1 KB timer.
//
// # Redis Cluster
//
// The scripts touch several of these keys at once, so in a cluster they
// must share a hash slot: give a prefix that is a hash tag, such as
// "{trellis}".
type RedisStore struct {
	client redis.UniversalClient
	// clk is nil unless injected: then due-ness is Redis TIME.
	clk     clockwork.Clock
	prefix  string
	keys    []string // due, data, failing
	gen     string
	marker  string
	channel string
}

var _ Store = (*RedisStore)(nil)

// RedisOption configures a RedisStore.
type RedisOption func(*RedisStore)

// WithRedisClock makes the store take "now" from clock instead of Redis
// TIME, for deterministic tests with a fake clock. Production stores
// should not use it: with Redis TIME, instances with skewed clocks still
// agree on due-ness.
func WithRedisClock(clock clockwork.Clock) RedisOption {
	return func(s *RedisStore) { s.clk = clock }
}

// NewRedisStore returns a store over client whose keys start with prefix
// ([DefaultRedisPrefix] when empty). The caller keeps ownership of client.
func NewRedisStore(client redis.UniversalClient, prefix string, opts ...RedisOption) *RedisStore {
	if prefix == "" {
		prefix = DefaultRedisPrefix
	}
	p := prefix + ":timers:"
	s := &RedisStore{
		client:  client,
		prefix:  prefix,
		keys:    []string{p + "due", p + "data", p + "failing"},
		gen:     p + "generation",
		marker:  p + "marker",
		channel: p + "wake",
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// clock is what the loop sleeps on: the injected clock, or the real one
// (the loop only sleeps for durations the store computed from Redis TIME,
// so the local clock's offset does not matter).
func (s *RedisStore) clock() clockwork.Clock {
	if s.clk != nil {
		return s.clk
	}
	return clockwork.NewRealClock()
}

// now is the scripts' ARGV[1]: "" (read Redis TIME) unless a clock was
// injected.
func (s *RedisStore) now(roundUp bool) string {
	if s.clk == nil {
		return ""
	}
	if roundUp {
		return strconv.FormatInt(ceilMs(s.clk.Now()), 10)
	}
	return strconv.FormatInt(floorMs(s.clk.Now()), 10)
}

func (s *RedisStore) markerName() string { return s.marker }

// open writes the marker unless it exists; fresh reports that it did not.
func (s *RedisStore) open(ctx context.Context) (bool, error) {
	set, err := s.client.SetNX(ctx, s.marker, markerValue(), 0).Result()
	if err != nil {
		return false, fmt.Errorf("write marker %s: %w", s.marker, err)
	}
	return set, nil
}

func (s *RedisStore) resetMarker(ctx context.Context) error {
	if err := s.client.Set(ctx, s.marker, markerValue(), 0).Err(); err != nil {
		return fmt.Errorf("write marker %s: %w", s.marker, err)
	}
	return nil
}

// markerValue says who wrote the marker and when, for whoever looks.
func markerValue() string {
	return "trellis timers " + time.Now().UTC().Format(time.RFC3339) + " " + rand.Text()[:8]
}

func (s *RedisStore) ping(ctx context.Context) error {
	if err := s.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("ping redis: %w", err)
	}
	return nil
}

func (s *RedisStore) create(ctx context.Context, r createRequest) (Timer, error) {
	call, err := encodeCall(r.call)
	if err != nil {
		return Timer{}, fmt.Errorf("encode call: %w", err)
	}
	res, err := createTimerWithLimit.Run(ctx, s.client, []string{s.keys[0], s.keys[1], s.keys[2], s.gen},
		s.now(true), durMs(r.delay), r.maxActive, r.maxRetries, r.name, call, s.channel).Slice()
	if err != nil {
		return Timer{}, fmt.Errorf("createTimerWithLimit: %w", err)
	}
	if len(res) == 2 && res[0] == "limit" {
		n, _ := res[1].(int64)
		return Timer{}, &LimitError{Limit: LimitActive, Value: int(n), Max: r.maxActive}
	}
	f, err := stringFields(res, 4)
	if err != nil || f[0] != "ok" {
		return Timer{}, fmt.Errorf("createTimerWithLimit: unexpected reply %v", res)
	}
	gen, err1 := strconv.ParseUint(f[1], 10, 64)
	created, err2 := strconv.ParseInt(f[2], 10, 64)
	due, err3 := strconv.ParseInt(f[3], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return Timer{}, fmt.Errorf("createTimerWithLimit: reply %v: %w", res, err)
	}
	return Timer{
		Name: r.name, Call: cloneTimer(Timer{Call: r.call}).Call, DueAt: time.UnixMilli(due),
		CreatedAt: time.UnixMilli(created), MaxRetries: r.maxRetries, Generation: gen,
	}, nil
}

func (s *RedisStore) get(ctx context.Context, name string) (Timer, error) {
	rec, err := s.client.HGet(ctx, s.keys[1], name).Result()
	if errors.Is(err, redis.Nil) {
		return Timer{}, fmt.Errorf("timer %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return Timer{}, err
	}
	return decodeRecord(name, rec)
}

func (s *RedisStore) remove(ctx context.Context, name string) error {
	if err := deleteTimer.Run(ctx, s.client, s.keys, name).Err(); err != nil {
		return fmt.Errorf("deleteTimer: %w", err)
	}
	return nil
}

func (s *RedisStore) claim(ctx context.Context, max int, lease time.Duration) (claimBatch, error) {
	res, err := claimDueTimers.Run(ctx, s.client, []string{s.keys[0], s.keys[1], s.keys[2], s.marker},
		s.now(false), max, max64(durMs(lease), 1)).Slice()
	if err != nil {
		return claimBatch{}, fmt.Errorf("claimDueTimers: %w", err)
	}
	if len(res) < 3 || len(res)%2 != 1 {
		return claimBatch{}, fmt.Errorf("claimDueTimers: unexpected reply of %d values", len(res))
	}
	head, err := stringFields(res[:2], 2)
	if err != nil {
		return claimBatch{}, fmt.Errorf("claimDueTimers: %w", err)
	}
	now, err1 := strconv.ParseInt(head[0], 10, 64)
	wait, err2 := strconv.ParseInt(head[1], 10, 64)
	marker, ok := res[2].(int64)
	if err := errors.Join(err1, err2); err != nil || !ok {
		return claimBatch{}, fmt.Errorf("claimDueTimers: unexpected reply head %v", res[:3])
	}
	b := claimBatch{now: time.UnixMilli(now), wait: time.Duration(wait) * time.Millisecond, wiped: marker == 0}
	if wait < 0 {
		b.wait = -1
	}
	for i := 3; i < len(res); i += 2 {
		kv, err := stringFields(res[i:i+2], 2)
		if err != nil {
			return claimBatch{}, fmt.Errorf("claimDueTimers: %w", err)
		}
		t, err := decodeRecord(kv[0], kv[1])
		if err != nil {
			// The claim stands; the timer's lease will expire and the
			// claim script drop it if it still does not parse.
			return claimBatch{}, fmt.Errorf("claimDueTimers: %w", err)
		}
		b.timers = append(b.timers, t)
	}
	return b, nil
}

func (s *RedisStore) complete(ctx context.Context, fs []Firing) ([]bool, error) {
	args := make([]any, 0, 2*len(fs))
	for _, f := range fs {
		args = append(args, f.Name, f.Generation)
	}
	res, err := completeTimers.Run(ctx, s.client, s.keys, args...).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("completeTimers: %w", err)
	}
	ok := make([]bool, len(res))
	for i, v := range res {
		ok[i] = v == 1
	}
	return ok, nil
}

func (s *RedisStore) fail(ctx context.Context, fs []failure) ([]failOutcome, error) {
	args := make([]any, 0, 1+5*len(fs))
	args = append(args, s.now(false))
	for _, f := range fs {
		after := int64(-1)
		if !f.giveUp {
			after = durMs(f.retryAfter)
		}
		args = append(args, f.firing.Name, f.firing.Generation, f.firing.Attempt, after, truncateError(f.err))
	}
	res, err := rescheduleFailedTimers.Run(ctx, s.client, s.keys, args...).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("rescheduleFailedTimers: %w", err)
	}
	out := make([]failOutcome, len(res))
	for i, v := range res {
		out[i] = failOutcome(v)
	}
	return out, nil
}

func (s *RedisStore) release(ctx context.Context, fs []Firing) error {
	args := make([]any, 0, 1+3*len(fs))
	args = append(args, s.now(false))
	for _, f := range fs {
		args = append(args, f.Name, f.Generation, f.Attempt)
	}
	if err := releaseTimers.Run(ctx, s.client, s.keys, args...).Err(); err != nil {
		return fmt.Errorf("releaseTimers: %w", err)
	}
	return nil
}

// subscribeTimeout bounds waiting for Redis to confirm the subscription.
const subscribeTimeout = 5 * time.Second

// subscribe listens on the wake channel. It returns once Redis confirmed
// the subscription, so that no create published after that is missed
// (while connected; a reconnect can lose messages, which IdleCheck
// covers).
func (s *RedisStore) subscribe(wake func()) (func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
	defer cancel()
	ps := s.client.Subscribe(ctx, s.channel)
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		return nil, fmt.Errorf("subscribe to %s: %w", s.channel, err)
	}
	ch := ps.Channel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range ch {
			wake()
		}
	}()
	return func() {
		_ = ps.Close()
		<-done
	}, nil
}

// stringFields checks that vals holds n strings and returns them.
func stringFields(vals []any, n int) ([]string, error) {
	if len(vals) < n {
		return nil, fmt.Errorf("reply has %d values, want %d", len(vals), n)
	}
	out := make([]string, n)
	for i := range n {
		s, ok := vals[i].(string)
		if !ok {
			return nil, fmt.Errorf("reply value %d is %T, want a string", i, vals[i])
		}
		out[i] = s
	}
	return out, nil
}
