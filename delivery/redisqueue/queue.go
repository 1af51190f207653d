// Package redisqueue owns the Redis implementation of the durable producer
// queue of reliable delivery (the durable.Queue contract): what a producer
// has sent and what its consumers have confirmed, kept in Redis so that it
// survives the producer's process, and owned by one producer controller at
// a time across every process on the Redis (durable.Owned).
//
// A service's queue is made by [ForService], so that its keys start with
// the service's key prefix like every other key of the service; [New] takes
// a prefix of its own. Each queue's keys share a hash tag (package
// keyspace's convention), so they sit in one cluster slot and every write
// is one atomic Lua script, while the queues of different producers land
// in different slots and spread over a cluster's masters:
//
//	<base>:meta        hash: current (next seqNr), highest (confirmed), partialFrom/partialQualifier, incarnation (the epoch: loads), holder (the owner's name)
//	<base>:lease       string: the owner's token, expired by Redis (see WithLease)
//	<base>:confirmed   hash: qualifier -> "seqNr:unixMillis"
//	<base>:qualifiers  set of the qualifiers with stored messages
//	<base>:q:QUALIFIER sorted set of the unconfirmed messages of one qualifier, scored by seqNr
//
// where <base> is <service prefix>:queue:{<producer id>} ([ForService]) or
// {<prefix>} ([New]). A qualifier other than durable.NoQualifier (a worker,
// an entity) leaves the qualifiers set and the confirmed hash as soon as
// every message of it is confirmed, so that workers that come and go do not
// grow them.
//
// Every write is one round trip to Redis: a script (store_batch.lua) that
// checks the epoch and the sequence number and stores a batch of sent
// messages, and the confirmations that came meanwhile (the Queue is a
// durable.BatchQueue). A batch's whole messages of one qualifier are one
// member of its sorted set (record.go), so Redis does the same work for a
// batch of one message or of hundreds. The round trip dominates: see the
// package benchmark.
package redisqueue

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/internal/keyspace"
)

// Client is what the queue needs of a go-redis client: *redis.Client,
// *redis.ClusterClient and redis.UniversalClient all are.
type Client interface {
	redis.Scripter
	redis.Cmdable
}

// Queue is a durable.Queue in Redis, a durable.BatchQueue and a
// durable.Owned. It is safe for concurrent use; one Queue value serves one
// producer controller at a time (its token is the lease's holder).
type Queue[A any] struct {
	client                             Client
	codec                              durable.Codec[A]
	name                               string // for errors: the prefix, or the service prefix and producer id
	base                               string // every key is base + ":" + ...
	meta, confirmed, qualifiers, lease string
	token                              string        // this value's lease holder
	holder                             string        // the name it records as the holder (WithHolder)
	leaseFor                           time.Duration // the lease
	epoch                              atomic.Uint64 // the epoch this value last loaded; 0: none
}

var _ durable.BatchQueue[int] = (*Queue[int])(nil)

// New returns the queue stored under prefix (any non-empty text without
// braces: the keys' hash tag), whose whole messages codec encodes (nil:
// durable.JSON). Chunks are stored as they are. A service's own queue is
// better made by ForService.
func New[A any](client Client, prefix string, codec durable.Codec[A], opts ...Option) (*Queue[A], error) {
	if prefix == "" || strings.ContainsAny(prefix, "{}") {
		return nil, fmt.Errorf("redisqueue: prefix %q must be non-empty and free of braces (it is the keys' hash tag)", prefix)
	}
	return newQueue(client, prefix, keyspace.Tag(prefix), codec, opts)
}

// ForService returns the queue of producer producerID of the service
// whose key prefix is servicePrefix (trellis.Config.RedisPrefix; empty:
// "trellis", the default, as for the service's other stores): its keys
// are <servicePrefix>:queue:{<producerID>}:…, found with the service's
// other keys by the pattern <servicePrefix>:*.
func ForService[A any](client Client, servicePrefix, producerID string, codec durable.Codec[A], opts ...Option) (*Queue[A], error) {
	space, err := keyspace.New(servicePrefix)
	if err != nil {
		return nil, fmt.Errorf("redisqueue: service prefix: %w", err)
	}
	if producerID == "" || strings.ContainsAny(producerID, "{}") {
		return nil, fmt.Errorf("redisqueue: producer id %q must be non-empty and free of braces (it is the keys' hash tag)", producerID)
	}
	base := space.Tagged("queue", producerID, "")
	return newQueue(client, space.Prefix()+" producer "+producerID, base[:len(base)-1], codec, opts)
}

func newQueue[A any](client Client, name, base string, codec durable.Codec[A], opts []Option) (*Queue[A], error) {
	if client == nil {
		return nil, errors.New("redisqueue: the client is nil")
	}
	o := options{lease: DefaultLease}
	for _, opt := range opts {
		opt(&o)
	}
	if o.lease < 100*time.Millisecond {
		return nil, fmt.Errorf("redisqueue: lease %v: must be at least 100ms", o.lease)
	}
	if codec == nil {
		codec = durable.JSON[A]{}
	}
	return &Queue[A]{
		client: client, codec: codec, name: name, base: base,
		meta: base + ":meta", confirmed: base + ":confirmed", qualifiers: base + ":qualifiers", lease: base + ":lease",
		token: uuid.NewString(), holder: o.holder, leaseFor: o.lease,
	}, nil
}

func (q *Queue[A]) messagesKey(qualifier string) string {
	return q.base + ":q:" + qualifier
}

//go:embed store_batch.lua
var storeBatchSrc string

var storeBatchScript = redis.NewScript(storeBatchSrc)

// StoreMessageSent stores m as the durable.Queue contract says, atomically.
func (q *Queue[A]) StoreMessageSent(ctx context.Context, m durable.MessageSent[A]) error {
	return q.StoreBatch(ctx, durable.Batch[A]{Sent: []durable.MessageSent[A]{m}})
}

// StoreMessageConfirmed records a confirmation as the durable.Queue
// contract says, atomically.
func (q *Queue[A]) StoreMessageConfirmed(ctx context.Context, seqNr durable.SeqNr, qualifier string, at time.Time) error {
	return q.StoreBatch(ctx, durable.Batch[A]{Confirmed: []durable.QualifiedConfirmation{{Qualifier: qualifier, SeqNr: seqNr, Timestamp: at}}})
}

// StoreBatch stores b as the durable.BatchQueue contract says, atomically,
// in one script call: one round trip.
func (q *Queue[A]) StoreBatch(ctx context.Context, b durable.Batch[A]) error {
	op := "store batch"
	switch {
	case len(b.Sent) == 1 && len(b.Confirmed) == 0:
		op = fmt.Sprintf("store message sent %d", b.Sent[0].SeqNr)
	case len(b.Sent) > 0:
		op = fmt.Sprintf("store messages sent %d-%d", b.Sent[0].SeqNr, b.Sent[len(b.Sent)-1].SeqNr)
	case len(b.Confirmed) == 1:
		op = fmt.Sprintf("store message confirmed %d", b.Confirmed[0].SeqNr)
	}
	if err := durable.CheckConsecutive(b.Sent); err != nil {
		return fmt.Errorf("redisqueue %s: %s: %w", q.name, op, err)
	}
	keys, args, err := q.batchArgs(b)
	if err != nil {
		return fmt.Errorf("redisqueue %s: %s: %w", q.name, op, err)
	}
	epoch := q.epoch.Load()
	res, err := storeBatchScript.Run(ctx, q.client, keys, append(args, epoch)...).Int64()
	if err != nil {
		return fmt.Errorf("redisqueue %s: %s: %w", q.name, op, fenced(err, epoch))
	}
	if res < 0 {
		return fmt.Errorf("redisqueue %s: %s: %w: current is %d", q.name, op, durable.ErrUnexpectedSeqNr, -res)
	}
	return nil
}

// member is a member of a qualifier's sorted set that a batch stores: a
// group of whole messages, or a chunk (see record.go).
type member struct {
	record []byte
	qual   int // the index of its qualifier in the script's arguments
	score  durable.SeqNr
}

// batchArgs lays b out as store_batch.lua takes it.
func (q *Queue[A]) batchArgs(b durable.Batch[A]) (keys []string, args []any, err error) {
	keys = append(make([]string, 0, 4), q.meta, q.confirmed, q.qualifiers)
	var quals []any // the qualifiers' names, in the order of their keys
	index := func(qual string) int {
		for i, name := range quals {
			if name == qual {
				return i + 1
			}
		}
		quals = append(quals, qual)
		keys = append(keys, q.messagesKey(qual))
		return len(quals)
	}
	var members []member
	var groups []int // the member of each qualifier's group, by its index - 1; -1 for none yet
	var scratch []byte
	// The chunked message the batch leaves partial (a trailing run of
	// chunks without its last one): -1 when the batch leaves that as it
	// was (it holds only middle chunks), 0 when none is.
	partial, partialQual := durable.SeqNr(-1), 0
	for _, m := range b.Sent {
		i := index(m.Qualifier)
		switch c := m.Chunk; {
		case c == nil || c.First && c.Last:
			partial = 0
		case c.First:
			partial, partialQual = m.SeqNr, i
		}
		if m.Chunk != nil {
			rec, err := appendRecord(nil, q.codec, m)
			if err != nil {
				return nil, nil, fmt.Errorf("message %d: %w", m.SeqNr, err)
			}
			members = append(members, member{record: rec, qual: i, score: m.SeqNr})
			continue
		}
		for len(groups) < i {
			groups = append(groups, -1)
		}
		if groups[i-1] < 0 {
			groups[i-1] = len(members)
			members = append(members, member{qual: i})
		}
		g := &members[groups[i-1]]
		if g.record, scratch, err = appendGrouped(g.record, scratch, len(b.Sent), q.codec, m); err != nil {
			return nil, nil, fmt.Errorf("message %d: %w", m.SeqNr, err)
		}
		g.score = m.SeqNr
	}
	tail := make([]any, 0, 6+3*len(members)+1+3*len(b.Confirmed))
	if len(b.Sent) > 0 {
		tail = append(tail, len(b.Sent), b.Sent[0].SeqNr, index(b.Sent[0].Qualifier), partial, partialQual, len(members))
	} else {
		tail = append(tail, 0, 0, 0, -1, 0, 0)
	}
	for _, m := range members {
		tail = append(tail, m.record, m.qual, m.score)
	}
	tail = append(tail, len(b.Confirmed))
	for _, c := range b.Confirmed {
		tail = append(tail, c.SeqNr, index(c.Qualifier), c.Timestamp.UnixMilli())
	}
	return keys, append(quals, tail...), nil
}

// LoadState takes the lease (durable.Owned: an *durable.OwnedError while
// another holds it), which moves the epoch on, then reads the state in one
// transaction for the hashes and the set, then the unconfirmed messages of
// each qualifier. The fence keeps every earlier owner from writing, and
// this one is not running yet, so the reads are consistent.
func (q *Queue[A]) LoadState(ctx context.Context) (durable.State[A], error) {
	fail := func(err error) (durable.State[A], error) {
		return durable.State[A]{}, fmt.Errorf("redisqueue %s: load state: %w", q.name, err)
	}
	epoch, err := q.acquire(ctx)
	if err != nil {
		return fail(err)
	}
	q.epoch.Store(epoch)
	var meta, confirmed *redis.MapStringStringCmd
	var quals *redis.StringSliceCmd
	_, err = q.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		meta = p.HGetAll(ctx, q.meta)
		confirmed = p.HGetAll(ctx, q.confirmed)
		quals = p.SMembers(ctx, q.qualifiers)
		return nil
	})
	if err != nil {
		return fail(err)
	}
	s := durable.EmptyState[A]()
	s.Incarnation = epoch
	if v, ok := meta.Val()["current"]; ok {
		if s.CurrentSeqNr, err = strconv.ParseInt(v, 10, 64); err != nil {
			return fail(fmt.Errorf("meta current %q: %w", v, err))
		}
	}
	if v, ok := meta.Val()["highest"]; ok {
		if s.HighestConfirmedSeqNr, err = strconv.ParseInt(v, 10, 64); err != nil {
			return fail(fmt.Errorf("meta highest %q: %w", v, err))
		}
	}
	for qual, v := range confirmed.Val() {
		seq, ms, ok := strings.Cut(v, ":")
		n, err1 := strconv.ParseInt(seq, 10, 64)
		t, err2 := strconv.ParseInt(ms, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return fail(fmt.Errorf("confirmation of %q: malformed %q", qual, v))
		}
		s.Confirmed[qual] = durable.Confirmation{SeqNr: n, Timestamp: time.UnixMilli(t)}
	}
	cmds := make([]*redis.StringSliceCmd, 0, len(quals.Val()))
	if len(quals.Val()) > 0 {
		_, err = q.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, qual := range quals.Val() {
				cmds = append(cmds, p.ZRange(ctx, q.messagesKey(qual), 0, -1))
			}
			return nil
		})
		if err != nil {
			return fail(err)
		}
	}
	for _, cmd := range cmds {
		for _, rec := range cmd.Val() {
			if s.Unconfirmed, err = decodeMember(s.Unconfirmed, q.codec, []byte(rec)); err != nil {
				return fail(err)
			}
		}
	}
	// A group confirmed in part stays whole in Redis; its confirmed
	// records are left out here.
	s.Unconfirmed = slices.DeleteFunc(s.Unconfirmed, func(m durable.MessageSent[A]) bool {
		return m.SeqNr <= s.Confirmed[m.Qualifier].SeqNr
	})
	slices.SortFunc(s.Unconfirmed, func(a, b durable.MessageSent[A]) int { return cmp.Compare(a.SeqNr, b.SeqNr) })
	return s, nil
}

// Delete removes everything the queue stored.
func (q *Queue[A]) Delete(ctx context.Context) error {
	quals, err := q.client.SMembers(ctx, q.qualifiers).Result()
	if err != nil {
		return fmt.Errorf("redisqueue %s: delete: %w", q.name, err)
	}
	keys := []string{q.meta, q.confirmed, q.qualifiers, q.lease}
	for _, qual := range quals {
		keys = append(keys, q.messagesKey(qual))
	}
	if err := q.client.Del(ctx, keys...).Err(); err != nil {
		return fmt.Errorf("redisqueue %s: delete: %w", q.name, err)
	}
	return nil
}
