package timers

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/store"
)

// DefaultRedisPrefix is the key prefix [NewRedisStore] uses when given "".
const DefaultRedisPrefix = "trellis"

// RedisStore keeps timers in Redis, or in a Redis Cluster, shared by every
// scheduler (instance) on the same Redis and prefix. It is as durable as
// the Redis server: run Redis with AOF (appendonly yes) so that a restart
// loses nothing, and a wipe is detected (see [WipedError]).
//
// # Key layout
//
// The timers are split into 16 partitions by a hash of their name; each
// partition's keys share the hash tag {T} of the partition (package
// keyspace), so they are in one cluster slot and every script stays on one
// server:
//
//	<prefix>:timers:{T}:due         sorted set: name → next run (due time, or lease expiry while claimed), ms
//	<prefix>:timers:{T}:data        hash: name → record, written when the timer is created (see redisscripts.go)
//	<prefix>:timers:{T}:state       hash: name → state of a timer that has run: attempts, last attempt, due, last error
//	<prefix>:timers:{T}:failing     set: names whose last call failed (for Stats and the failing filter)
//	<prefix>:timers:{T}:dead        hash: name → dead letter of a timer that gave up: time of death, then its record
//	<prefix>:timers:{T}:deadat      sorted set: name → time of death, ms (for the list and the pruning)
//	<prefix>:timers:{T}:generation  string: the partition's last generation (INCR)
//	<prefix>:timers:{T}:marker      string: written when a scheduler starts; its loss means a wipe
//	<prefix>:timers:wake            pub/sub channel: "a new earliest timer", for sleeping loops
//
// The tags are chosen so that the partitions' slots are evenly spaced, and
// so spread over a cluster's masters. Two structures per pending timer
// (three once it has run), one entry in each, and no key per timer: a key
// costs Redis ~70 bytes of its own, and the 50,000-timer target is
// ≤ 1,400 bytes per pending 1 KB timer.
//
// # Across partitions
//
// A name lives in one partition only, so names are unique service-wide and
// a replace is one script. Every instance claims from every partition, in
// one pipelined round (one round trip per master, in parallel). Each
// partition has its own generation counter and its own marker, so wipe
// detection works per partition (a master that restarts empty is noticed
// even when the others are intact). The admin list merges the partitions'
// run orders. The one store-wide rule that spans partitions is the limit
// on active timers; see [RedisStore.create] for how exact it stays.
type RedisStore struct {
	client redis.UniversalClient
	// clk is nil unless injected: then due-ness is Redis TIME.
	clk     clockwork.Clock
	keys    keyspace.Space
	parts   []partition
	channel string
	// nextClaim rotates the partition a claim starts its quotas at, so
	// that a loop with few free workers still serves every partition.
	nextClaim atomic.Uint32
	// plan says which partitions a claim asks.
	plan *claimPlan
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

// NewRedisStore returns a store over client (one Redis or a cluster) whose
// keys start with prefix ([DefaultRedisPrefix] when empty). The caller
// keeps ownership of client. It panics on a prefix keyspace.CheckPrefix
// refuses, as regexp.MustCompile does on a bad pattern: a prefix that
// comes from input is checked when the input is.
func NewRedisStore(client redis.UniversalClient, prefix string, opts ...RedisOption) *RedisStore {
	keys := keyspace.Must(prefix)
	s := &RedisStore{
		client:  client,
		keys:    keys,
		parts:   newPartitions(keys),
		channel: keys.Key("timers", "wake"),
		plan:    newClaimPlan(redisPartitions),
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

func (s *RedisStore) part(name string) partition { return s.parts[partitionOf(name)] }

// open writes every partition's marker unless it exists, and returns the
// markers that did not.
func (s *RedisStore) open(ctx context.Context) (_ []string, err error) {
	defer markUnavailable(&err)
	pipe := s.client.Pipeline()
	cmds := make([]*redis.BoolCmd, len(s.parts))
	for i, p := range s.parts {
		cmds[i] = pipe.SetNX(ctx, p.marker, markerValue(), 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("write markers %s…: %w", s.parts[0].marker, err)
	}
	var missing []string
	for i, c := range cmds {
		if c.Val() {
			missing = append(missing, s.parts[i].marker)
		}
	}
	return missing, nil
}

func (s *RedisStore) resetMarker(ctx context.Context) (err error) {
	defer markUnavailable(&err)
	pipe := s.client.Pipeline()
	for _, p := range s.parts {
		pipe.Set(ctx, p.marker, markerValue(), 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("write markers %s…: %w", s.parts[0].marker, err)
	}
	return nil
}

// markerValue says who wrote the marker and when, for whoever looks.
func markerValue() string {
	return "trellis timers " + time.Now().UTC().Format(time.RFC3339) + " " + rand.Text()[:8]
}

// ping checks one Redis, or every master of a cluster: the partitions are
// on all of them.
func (s *RedisStore) ping(ctx context.Context) (err error) {
	defer markUnavailable(&err)
	if err := keyspace.Ping(ctx, s.client); err != nil {
		return fmt.Errorf("ping redis: %w", err)
	}
	return nil
}

// create runs the create script on the name's partition, which counts
// the timers and refuses at the limit, atomically with the write.
//
// On one Redis (a *redis.Client) every partition is on the one server, so
// the script counts them all itself: the limit is exact, and a create is
// one round trip. On a cluster a script reaches one slot only, so create
// first counts the other partitions (one pipelined HLEN each, sent to
// every master at once) and the script adds its own partition's count.
// There creates of new names that run at the same time in different
// partitions each count before the others write, so together they can
// overshoot the limit by at most their number minus one: with k creates
// in flight at once across all instances, the store holds at most
// MaxActive+k-1 timers. (Within one partition the script serialises them.)
func (s *RedisStore) create(ctx context.Context, r createRequest) (_ Timer, err error) {
	defer s.markWrite(&err)
	call, err := encodeStored(r.recur, r.call, r.traceCtx)
	if err != nil {
		return Timer{}, fmt.Errorf("encode call: %w", err)
	}
	home := partitionOf(r.name)
	p := s.parts[home]
	keys, others, err := s.limitKeys(ctx, home, append(slices.Clip(p.keys), p.gen))
	if err != nil {
		return Timer{}, err
	}
	at, ifGen, due := "", "", s.clock().Now().Add(r.delay)
	if !r.at.IsZero() {
		at, due = strconv.FormatInt(ceilMs(r.at), 10), r.at
	}
	if r.ifGen != 0 {
		ifGen = strconv.FormatUint(r.ifGen, 10)
	}
	res, err := createTimerWithLimit.Run(ctx, s.client, keys,
		s.now(true), durMs(r.delay), r.maxActive, r.maxRetries, r.name, call, s.channel, others, home, at, ifGen).Slice()
	// Even after an error: the create may have happened.
	s.plan.expect(home, due)
	if err != nil {
		return Timer{}, fmt.Errorf("createTimerWithLimit: %w", err)
	}
	t, err := parseCreated(res, r.maxActive)
	if err != nil {
		return Timer{}, fmt.Errorf("createTimerWithLimit: %w", err)
	}
	t.Name, t.Call, t.MaxRetries, t.TraceContext = r.name, cloneTimer(Timer{Call: r.call}).Call, r.maxRetries, r.traceCtx
	if r.recur != nil {
		rc := *r.recur
		t.Recurring = &rc
	}
	return t, nil
}

// limitKeys completes the keys of a script that checks the active limit
// in partition home: on one Redis, the data hashes of every other
// partition, which the script counts itself; on a cluster, where a script
// reaches one slot only, it counts them first (others).
func (s *RedisStore) limitKeys(ctx context.Context, home int, keys []string) (_ []string, others int64, err error) {
	if _, oneServer := s.client.(*redis.Client); oneServer {
		for i, o := range s.parts {
			if i != home {
				keys = append(keys, o.keys[1])
			}
		}
		return keys, 0, nil
	}
	if others, err = s.countOthers(ctx, home); err != nil {
		return nil, 0, store.Classify(err) // a read, before the write
	}
	return keys, others, nil
}

// parseCreated reads the reply of prelude.lua's insert: the new timer's
// generation and times, or a *LimitError.
func parseCreated(res []any, maxActive int) (Timer, error) {
	if len(res) == 2 && res[0] == "limit" {
		n, _ := res[1].(int64)
		return Timer{}, &LimitError{Limit: LimitActive, Value: int(n), Max: maxActive}
	}
	if len(res) == 1 && res[0] == "changed" {
		return Timer{}, ErrChanged
	}
	if len(res) == 1 && res[0] == "missing" {
		return Timer{}, ErrNotFound
	}
	f, err := stringFields(res, 4)
	if err != nil || f[0] != "ok" {
		return Timer{}, fmt.Errorf("unexpected reply %v", res)
	}
	gen, err1 := strconv.ParseUint(f[1], 10, 64)
	created, err2 := strconv.ParseInt(f[2], 10, 64)
	due, err3 := strconv.ParseInt(f[3], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return Timer{}, fmt.Errorf("reply %v: %w", res, err)
	}
	return Timer{DueAt: time.UnixMilli(due), CreatedAt: time.UnixMilli(created), Generation: gen}, nil
}

// countOthers is the number of timers in every partition but skip.
func (s *RedisStore) countOthers(ctx context.Context, skip int) (int64, error) {
	pipe := s.client.Pipeline()
	cmds := make([]*redis.IntCmd, 0, len(s.parts)-1)
	for i, p := range s.parts {
		if i != skip {
			cmds = append(cmds, pipe.HLen(ctx, p.keys[1]))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("count timers (HLEN of each partition): %w", err)
	}
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, nil
}

func (s *RedisStore) get(ctx context.Context, name string) (_ Timer, err error) {
	defer markUnavailable(&err)
	ts, err := s.fetch(ctx, []string{name}, false)
	if err != nil {
		return Timer{}, err
	}
	if ts[0] == nil {
		return Timer{}, fmt.Errorf("timer %q: %w", name, ErrNotFound)
	}
	return *ts[0], nil
}

func (s *RedisStore) remove(ctx context.Context, name string) (err error) {
	defer s.markWrite(&err)
	if err := deleteTimer.Run(ctx, s.client, s.part(name).keys, name).Err(); err != nil {
		return fmt.Errorf("deleteTimer: %w", err)
	}
	return nil
}

// subscribeTimeout bounds waiting for Redis to confirm the subscription.
const subscribeTimeout = 5 * time.Second

// subscribe listens on the wake channel. It returns once Redis confirmed
// the subscription, so that no create published after that is missed
// (while connected; a reconnect can lose messages, which IdleCheck and
// the full claim round cover). On a cluster a PUBLISH on any master
// reaches the subscribers of every node. A message names the partition
// ("<partition>:<due ms>"), which the next claim asks.
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
		for msg := range ch {
			part, _, _ := strings.Cut(msg.Payload, ":")
			if i, err := strconv.Atoi(part); err == nil && i >= 0 && i < len(s.parts) {
				s.plan.touch(i)
			}
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
	out := make([]string, n)
	if err := stringsInto(out, vals); err != nil {
		return nil, err
	}
	return out, nil
}

// stringsInto checks that vals holds len(dst) strings and copies them
// into dst.
func stringsInto(dst []string, vals []any) error {
	if len(vals) < len(dst) {
		return fmt.Errorf("reply has %d values, want %d", len(vals), len(dst))
	}
	for i := range dst {
		s, ok := vals[i].(string)
		if !ok {
			return fmt.Errorf("reply value %d is %T, want a string", i, vals[i])
		}
		dst[i] = s
	}
	return nil
}

// markUnavailable marks *err as components.ErrUnavailable when Redis could not
// serve the call: every method of the store's protocol defers it.
func markUnavailable(err *error) { *err = store.Classify(*err) }

// markWrite is markUnavailable for a call that writes: a failure after the
// write was sent is components.ErrOutcomeUnknown (see store.ClassifyWriteBy).
func (s *RedisStore) markWrite(err *error) { *err = store.ClassifyWriteBy(s.client, *err) }
