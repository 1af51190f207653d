package entities

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/store"
	"github.com/trellis-go/trellis/internal/tracing"
)

// The journals' keys, on a RedisStore and on a ShardedRedisStore alike:
//
//	<prefix>:journal:{<shard tag>}:<len(type)>:<type>:<id>  hash: seq, del, snap, snapseq, snapat
//	<prefix>:events:{<shard tag>}:<len(type)>:<type>:<id>   stream: entry <seq>-0, fields n, d, a
//
// in the slot of the entity's shard ([cluster.ShardTag]), so that on a
// ShardedRedisStore one script checks the fence, appends and records the
// changes in the shard's log, and on a Redis Cluster the head and the
// events are in one slot.

var (
	_ JournalStore = (*RedisStore)(nil)
	_ JournalStore = (*ShardedRedisStore)(nil)
)

//go:embed journal_append.lua
var journalAppendLua string

//go:embed journal_read.lua
var journalReadLua string

var (
	journalAppend = cluster.FencedScript(changeLua + "\n" + appliedLua + "\n" + journalAppendLua)
	journalRead   = redis.NewScript(journalReadLua)
)

// journalSpace is every shard's prefixes of the journals' keys, made once
// per store so that an append does not build them again:
// "<prefix>:journal:{<shard tag>}:" and "<prefix>:events:{<shard tag>}:".
type journalSpace [cluster.NumShards]struct{ head, events string }

func newJournalSpace(keys keyspace.Space) *journalSpace {
	j := new(journalSpace)
	for shard := range j {
		tag := cluster.ShardTag(shard)
		j[shard].head, j[shard].events = keys.Tagged("journal", tag, ""), keys.Tagged("events", tag, "")
	}
	return j
}

// keys are the head's and the events' keys of an entity.
func (j *journalSpace) keys(entityType, id string) (head, events string) {
	rest := strconv.Itoa(len(entityType)) + ":" + entityType + ":" + id
	p := &j[cluster.ShardOf(entityType, id)]
	return p.head + rest, p.events + rest
}

// ReadJournal implements [JournalStore].
func (s *RedisStore) ReadJournal(ctx context.Context, entityType, id string) (JournalHead, []JournalEvent, error) {
	return readJournal(ctx, s.client, s.journal, entityType, id)
}

// JournalSeq implements [JournalStore].
func (s *RedisStore) JournalSeq(ctx context.Context, entityType, id string) (uint64, bool, error) {
	return journalSeq(ctx, s.client, s.journal, entityType, id)
}

// JournalIDs implements [JournalStore].
func (s *RedisStore) JournalIDs(ctx context.Context, entityType string) ([]string, error) {
	return journalIDs(ctx, s.client, s.journal, entityType)
}

// Events implements [JournalStore].
func (s *RedisStore) Events(ctx context.Context, entityType, id string, after uint64, limit int) ([]JournalEvent, error) {
	return readEvents(ctx, s.client, s.journal, entityType, id, after, limit)
}

// Append implements [JournalStore]; the fence is not checked and no change
// is recorded (a RedisStore keeps no change log).
func (s *RedisStore) Append(ctx context.Context, _ Fence, entityType, id string, w JournalWrite) error {
	head, events := s.journal.keys(entityType, id)
	_, err := appendJournal(ctx, s.batch, []string{head, events}, Fence{}, entityType, id, w, 0)
	return err
}

// ReadJournal implements [JournalStore].
func (s *ShardedRedisStore) ReadJournal(ctx context.Context, entityType, id string) (JournalHead, []JournalEvent, error) {
	return readJournal(ctx, s.client, s.journal, entityType, id)
}

// JournalSeq implements [JournalStore].
func (s *ShardedRedisStore) JournalSeq(ctx context.Context, entityType, id string) (uint64, bool, error) {
	return journalSeq(ctx, s.client, s.journal, entityType, id)
}

// JournalIDs implements [JournalStore].
func (s *ShardedRedisStore) JournalIDs(ctx context.Context, entityType string) ([]string, error) {
	return journalIDs(ctx, s.client, s.journal, entityType)
}

// Events implements [JournalStore].
func (s *ShardedRedisStore) Events(ctx context.Context, entityType, id string, after uint64, limit int) ([]JournalEvent, error) {
	return readEvents(ctx, s.client, s.journal, entityType, id, after, limit)
}

// Append implements [JournalStore] under f, recording each event (and a
// delete) in the shard's change log.
func (s *ShardedRedisStore) Append(ctx context.Context, f Fence, entityType, id string, w JournalWrite) error {
	const op = "append to the journal"
	shard := cluster.ShardOf(entityType, id)
	if f.Shard != shard || f.Incarnation == "" {
		return opErr(op, entityType, id, fmt.Errorf("the fence is of shard %d (incarnation %q), the entity is in shard %d: %w",
			f.Shard, f.Incarnation, shard, ErrFenced))
	}
	head, events := s.journal.keys(entityType, id)
	k := &s.shards[shard]
	changes, err := appendJournal(ctx, s.batch, []string{head, events, k.record, k.checkpoints, k.changeSeq, k.changes},
		f, entityType, id, w, s.limit)
	if err != nil {
		return err
	}
	for _, c := range changes {
		s.watches.notify(shard, c)
	}
	return nil
}

// appendJournal runs journalAppend on keys and returns the changes it
// recorded.
func appendJournal(ctx context.Context, batch *store.Batcher, keys []string, f Fence,
	entityType, id string, w JournalWrite, limit int) ([]Change, error) {
	const op = "append to the journal"
	tc := tracing.CaptureForLink(ctx)
	// Numbers go as Go integers: go-redis writes them in decimal, as the
	// script compares them, without a string made for each.
	args := f.AppendArgs(make([]any, 0, 14+3*len(w.Applied)+4*len(w.Events)))
	seq := w.newSeq()
	del := ""
	if w.Delete {
		del = "1"
	}
	args = append(args, w.Expected, seq, del, w.TrimThrough)
	if w.Snapshot != nil {
		args = append(args, w.Snapshot.Seq, w.Snapshot.Data, w.Snapshot.At.UnixMilli())
	} else {
		args = append(args, "", "", "")
	}
	args = append(args, entityType, id, limit, tc, len(w.Applied))
	for i := range w.Applied {
		args = appendApplied(args, &w.Applied[i])
	}
	for _, e := range w.Events {
		if !ValidEventName(e.Name) {
			return nil, opErr(op, entityType, id, fmt.Errorf("event %d: name %q is not a valid event name", e.Seq, e.Name))
		}
		args = append(args, e.Seq, e.Name, e.Data, e.At.UnixMilli())
	}
	res, err := batch.Run(ctx, journalAppend, keys, args...).Slice()
	if err != nil {
		return nil, redisWriteErr(batch.Client(), op, entityType, id, err)
	}
	code, _ := res[0].(int64)
	switch code {
	case scriptFenced:
		return nil, opErr(op, entityType, id, fmt.Errorf("refused by the fence of shard %d (epoch %d): %w", f.Shard, f.Epoch, ErrFenced))
	case scriptConflict:
		found, _ := res[1].(string)
		n, _ := strconv.ParseUint(found, 10, 64)
		return nil, conflictErr(op, entityType, id, w.Expected, n)
	case scriptApplied:
		return nil, alreadyApplied(op, entityType, id, res[1])
	case journalDeleted:
		return nil, opErr(op, entityType, id, ErrJournalDeleted)
	case scriptDone:
	default:
		return nil, opErr(op, entityType, id, fmt.Errorf("unexpected reply %v", res))
	}
	// The recorded changes come in the order they were written: the
	// events', then the delete's.
	var changes []Change
	for i := 1; i+1 < len(res); i += 2 {
		c := Change{EntityType: entityType, EntityID: id, TraceContext: tc}
		text, _ := res[i].(string)
		at, _ := res[i+1].(string)
		c.Seq, _ = strconv.ParseUint(text, 10, 64)
		c.At = parseMicros(at)
		if n := len(changes); n < len(w.Events) {
			e := w.Events[n]
			c.Revision, c.Data = e.Seq, EventChangeData(e.Name, e.Data)
		} else {
			c.Revision, c.Deleted = seq, true
		}
		changes = append(changes, c)
	}
	return changes, nil
}

// journalDeleted is journal_append's code for a deleted entity.
const journalDeleted = 5

// parseMicros parses record_change's time, microseconds in decimal.
func parseMicros(text string) time.Time {
	us, _ := strconv.ParseInt(text, 10, 64)
	return time.UnixMicro(us)
}

// readJournal runs journalRead.
func readJournal(ctx context.Context, client redis.UniversalClient, js *journalSpace, entityType, id string) (JournalHead, []JournalEvent, error) {
	const op = "read the journal"
	head, events := js.keys(entityType, id)
	res, err := journalRead.Run(ctx, client, []string{head, events}).Slice()
	if err != nil {
		return JournalHead{}, nil, redisErr(op, entityType, id, err)
	}
	if len(res) != 2 {
		return JournalHead{}, nil, opErr(op, entityType, id, fmt.Errorf("unexpected reply %v", res))
	}
	fields, _ := res[0].([]any)
	if len(fields) != 5 {
		return JournalHead{}, nil, opErr(op, entityType, id, fmt.Errorf("unexpected head %v", res[0]))
	}
	str := func(i int) string { s, _ := fields[i].(string); return s }
	var h JournalHead
	if h.Seq, err = parseSeq(str(0)); err != nil {
		return JournalHead{}, nil, opErr(op, entityType, id, err)
	}
	h.Deleted = str(1) != ""
	if fields[3] != nil {
		snap := &Snapshot{Data: []byte(str(2))}
		if snap.Seq, err = parseSeq(str(3)); err != nil {
			return JournalHead{}, nil, opErr(op, entityType, id, err)
		}
		ms, _ := strconv.ParseInt(str(4), 10, 64)
		snap.At = time.UnixMilli(ms)
		h.Snapshot = snap
	}
	entries, _ := res[1].([]any)
	evs, err := parseEvents(entries)
	if err != nil {
		return JournalHead{}, nil, opErr(op, entityType, id, err)
	}
	return h, evs, nil
}

// journalSeq reads the head's seq and del.
func journalSeq(ctx context.Context, client redis.UniversalClient, js *journalSpace, entityType, id string) (uint64, bool, error) {
	head, _ := js.keys(entityType, id)
	vals, err := client.HMGet(ctx, head, "seq", "del").Result()
	if err != nil {
		return 0, false, redisErr("read the journal's seq", entityType, id, err)
	}
	text, _ := vals[0].(string)
	seq, err := parseSeq(text)
	if err != nil {
		return 0, false, opErr("read the journal's seq", entityType, id, err)
	}
	return seq, vals[1] != nil, nil
}

// journalIDs scans every shard's journal heads of entityType, each on the
// master that holds the shard's slot.
func journalIDs(ctx context.Context, client redis.UniversalClient, js *journalSpace, entityType string) ([]string, error) {
	fail := func(err error) error {
		return fmt.Errorf("list the journals of %q: %w", entityType, store.Classify(err))
	}
	var ids []string
	for shard := range cluster.NumShards {
		prefix := js[shard].head + strconv.Itoa(len(entityType)) + ":" + entityType + ":"
		var node redis.Cmdable = client
		if cc, ok := client.(*redis.ClusterClient); ok {
			master, err := cc.MasterForKey(ctx, prefix)
			if err != nil {
				return nil, fail(err)
			}
			node = master
		}
		iter := node.Scan(ctx, 0, globEscape(prefix)+"*", 500).Iterator()
		for iter.Next(ctx) {
			ids = append(ids, strings.TrimPrefix(iter.Val(), prefix))
		}
		if err := iter.Err(); err != nil {
			return nil, fail(err)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// readEvents pages the events stream.
func readEvents(ctx context.Context, client redis.UniversalClient, js *journalSpace, entityType, id string, after uint64, limit int) ([]JournalEvent, error) {
	const op = "read the events"
	if limit <= 0 {
		return nil, nil
	}
	_, events := js.keys(entityType, id)
	msgs, err := client.XRangeN(ctx, events, "("+strconv.FormatUint(after, 10)+"-0", "+", int64(limit)).Result()
	if err != nil {
		return nil, redisErr(op, entityType, id, err)
	}
	out := make([]JournalEvent, 0, len(msgs))
	for _, m := range msgs {
		e, err := eventOf(m.ID, func(f string) string { s, _ := m.Values[f].(string); return s })
		if err != nil {
			return nil, opErr(op, entityType, id, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// parseEvents parses XRANGE's reply as a script returns it.
func parseEvents(entries []any) ([]JournalEvent, error) {
	out := make([]JournalEvent, 0, len(entries))
	for _, x := range entries {
		entry, _ := x.([]any)
		if len(entry) != 2 {
			return nil, fmt.Errorf("unexpected event entry %v", x)
		}
		entryID, _ := entry[0].(string)
		kv, _ := entry[1].([]any)
		e, err := eventOf(entryID, func(f string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if k, _ := kv[i].(string); k == f {
					v, _ := kv[i+1].(string)
					return v
				}
			}
			return ""
		})
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// eventOf is the event of the stream entry entryID with fields field.
func eventOf(entryID string, field func(string) string) (JournalEvent, error) {
	seqText, _, _ := strings.Cut(entryID, "-")
	seq, err := parseSeq(seqText)
	if err != nil {
		return JournalEvent{}, fmt.Errorf("event entry %q: %w", entryID, err)
	}
	ms, err := strconv.ParseInt(field("a"), 10, 64)
	if err != nil {
		return JournalEvent{}, fmt.Errorf("event %d: time %q: %w", seq, field("a"), err)
	}
	return JournalEvent{Seq: seq, Name: field("n"), Data: []byte(field("d")), At: time.UnixMilli(ms)}, nil
}

// parseSeq parses a decimal event number; "" is 0.
func parseSeq(text string) (uint64, error) {
	if text == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("event number %q: %w", text, err)
	}
	return n, nil
}
