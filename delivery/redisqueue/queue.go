// Package redisqueue owns the Redis implementation of the durable producer
// queue of reliable delivery (the durable.Queue contract): what a producer
// has sent and what its consumers have confirmed, kept in Redis so that it
// survives the producer's process.
//
// Each queue lives under one key prefix (one per producer id) in four keys
// that share a hash tag (package keyspace's convention), so they sit in one
// cluster slot and every write is one atomic Lua script, while the queues
// of different producers land in different slots and spread over a
// cluster's masters:
//
//	{prefix}:meta        hash: current (next seqNr), highest (confirmed), partialFrom/partialQualifier, incarnation (loads)
//	{prefix}:confirmed   hash: qualifier -> "seqNr:unixMillis"
//	{prefix}:qualifiers  set of the qualifiers with stored messages
//	{prefix}:q:QUALIFIER sorted set of the unconfirmed messages of one qualifier, scored by seqNr
//
// Every write is one round trip to Redis: a script (store_batch.lua) that
// checks the sequence number and stores a batch of sent messages, and the
// confirmations that came meanwhile (the Queue is a durable.BatchQueue).
// A batch's whole messages of one qualifier are one member of its sorted
// set (record.go), so Redis does the same work for a batch of one message
// or of hundreds. The round trip dominates: see the package benchmark.
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
	"time"

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

// Queue is a durable.Queue in Redis. It is safe for concurrent use, but the
// contract allows one producer controller per prefix at a time.
type Queue[A any] struct {
	client                      Client
	codec                       durable.Codec[A]
	prefix                      string
	meta, confirmed, qualifiers string
}

var _ durable.BatchQueue[int] = (*Queue[int])(nil)

// New returns the queue stored under prefix (typically an application
// name and the producer id), whose whole messages codec encodes (nil:
// durable.JSON). Chunks are stored as they are.
func New[A any](client Client, prefix string, codec durable.Codec[A]) (*Queue[A], error) {
	if client == nil {
		return nil, errors.New("redisqueue: the client is nil")
	}
	if prefix == "" || strings.ContainsAny(prefix, "{}") {
		return nil, fmt.Errorf("redisqueue: prefix %q must be non-empty and free of braces (it is the keys' hash tag)", prefix)
	}
	if codec == nil {
		codec = durable.JSON[A]{}
	}
	tag := keyspace.Tag(prefix)
	return &Queue[A]{
		client: client, codec: codec, prefix: prefix,
		meta: tag + ":meta", confirmed: tag + ":confirmed", qualifiers: tag + ":qualifiers",
	}, nil
}

func (q *Queue[A]) messagesKey(qualifier string) string {
	return keyspace.Tag(q.prefix) + ":q:" + qualifier
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
		return fmt.Errorf("redisqueue %s: %s: %w", q.prefix, op, err)
	}
	keys, args, err := q.batchArgs(b)
	if err != nil {
		return fmt.Errorf("redisqueue %s: %s: %w", q.prefix, op, err)
	}
	res, err := storeBatchScript.Run(ctx, q.client, keys, args...).Int64()
	if err != nil {
		return fmt.Errorf("redisqueue %s: %s: %w", q.prefix, op, err)
	}
	if res < 0 {
		return fmt.Errorf("redisqueue %s: %s: %w: current is %d", q.prefix, op, durable.ErrUnexpectedSeqNr, -res)
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

// LoadState reads the state in one transaction for the hashes and the set,
// which also counts the load as a new incarnation, then the unconfirmed
// messages of each qualifier. A single writer (the
// contract's one producer controller, which is not running yet) keeps the
// two reads consistent.
func (q *Queue[A]) LoadState(ctx context.Context) (durable.State[A], error) {
	fail := func(err error) (durable.State[A], error) {
		return durable.State[A]{}, fmt.Errorf("redisqueue %s: load state: %w", q.prefix, err)
	}
	var meta, confirmed *redis.MapStringStringCmd
	var quals *redis.StringSliceCmd
	var incarnation *redis.IntCmd
	_, err := q.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		incarnation = p.HIncrBy(ctx, q.meta, "incarnation", 1)
		meta = p.HGetAll(ctx, q.meta)
		confirmed = p.HGetAll(ctx, q.confirmed)
		quals = p.SMembers(ctx, q.qualifiers)
		return nil
	})
	if err != nil {
		return fail(err)
	}
	s := durable.EmptyState[A]()
	s.Incarnation = uint64(incarnation.Val())
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
		return fmt.Errorf("redisqueue %s: delete: %w", q.prefix, err)
	}
	keys := []string{q.meta, q.confirmed, q.qualifiers}
	for _, qual := range quals {
		keys = append(keys, q.messagesKey(qual))
	}
	if err := q.client.Del(ctx, keys...).Err(); err != nil {
		return fmt.Errorf("redisqueue %s: delete: %w", q.prefix, err)
	}
	return nil
}
