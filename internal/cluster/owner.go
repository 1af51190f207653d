package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Errors of [Member.Acquire] and [Member.Release]; each is wrapped with
// the operation and the shard.
var (
	// ErrNotServing: the member's own lease is not surely alive, so it
	// may not take a shard (it could not act for it).
	ErrNotServing = errors.New("cluster: this member's lease is not valid")
	// ErrOwned: a live member owns the shard.
	ErrOwned = errors.New("cluster: the shard has a live owner")
	// ErrChanged: the record changed between reading and writing it;
	// read again.
	ErrChanged = errors.New("cluster: the shard record changed")
)

// Record is a shard's record as read from Redis.
type Record struct {
	Shard int
	// Owner and Incarnation name the owner; both empty when free.
	Owner, Incarnation string
	// Epoch counts the changes of owner; 0 when never owned.
	Epoch uint64
}

// Free reports whether no one owns the shard.
func (r Record) Free() bool { return r.Incarnation == "" }

// Records reads every shard's record, in one pipeline (on a cluster,
// go-redis sends one pipeline per master).
func (m *Member) Records(ctx context.Context) ([]Record, error) {
	pipe := m.cfg.Client.Pipeline()
	read := queueRecords(ctx, pipe, m.keys)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("cluster: read shard records: %w", err)
	}
	out, err := read()
	if err != nil {
		return nil, fmt.Errorf("cluster: read shard records: %w", err)
	}
	return out, nil
}

// queueRecords queues the HMGET of every shard's record on pipe; the
// function it returns parses their answers once the pipeline ran.
func queueRecords(ctx context.Context, pipe redis.Pipeliner, k keys) func() ([]Record, error) {
	cmds := make([]*redis.SliceCmd, NumShards)
	for s := range NumShards {
		cmds[s] = pipe.HMGet(ctx, k.shard(s), "owner", "inc", "epoch")
	}
	return func() ([]Record, error) {
		out := make([]Record, NumShards)
		for s, cmd := range cmds {
			r, err := parseRecord(s, cmd.Val())
			if err != nil {
				return nil, err
			}
			out[s] = r
		}
		return out, nil
	}
}

// record reads one shard's record.
func (m *Member) record(ctx context.Context, shard int) (Record, error) {
	vals, err := m.cfg.Client.HMGet(ctx, m.keys.shard(shard), "owner", "inc", "epoch").Result()
	if err != nil {
		return Record{}, err
	}
	return parseRecord(shard, vals)
}

// parseRecord reads HMGET owner inc epoch; absent fields are empty.
func parseRecord(shard int, vals []any) (Record, error) {
	if len(vals) != 3 {
		return Record{}, fmt.Errorf("shard %d: HMGET gave %d values, want 3", shard, len(vals))
	}
	str := func(v any) string { s, _ := v.(string); return s }
	r := Record{Shard: shard, Owner: str(vals[0]), Incarnation: str(vals[1])}
	if e := str(vals[2]); e != "" {
		n, err := strconv.ParseUint(e, 10, 64)
		if err != nil {
			return Record{}, fmt.Errorf("shard %d: epoch %q: %w", shard, e, err)
		}
		r.Epoch = n
	}
	return r, nil
}

// alive reports whether incarnation inc of member id still holds its key.
// A false answer is final (see the package doc).
func (m *Member) alive(ctx context.Context, id, inc string) (bool, error) {
	got, err := m.cfg.Client.HGet(ctx, m.keys.member(id), "inc").Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return got == inc, nil
}

// Acquire makes the member the owner of shard if it is free or its owner's
// incarnation is dead, adding one to the epoch, and returns the Fence to
// write under. If the member already owns it, it returns the current
// Fence. The steps and why they are safe are in the package doc. Errors:
// ErrNotServing, ErrOwned, ErrChanged, or Redis's.
func (m *Member) Acquire(ctx context.Context, shard int) (Fence, error) {
	fail := func(err error) (Fence, error) {
		return Fence{}, fmt.Errorf("cluster: acquire shard %d: %w", shard, err)
	}
	if shard < 0 || shard >= NumShards {
		return fail(fmt.Errorf("no such shard: want 0 to %d", NumShards-1))
	}
	if !m.lease.Serving() {
		return fail(ErrNotServing)
	}
	rec, err := m.record(ctx, shard)
	if err != nil {
		return fail(err)
	}
	if rec.Incarnation == m.inc {
		return Fence{Shard: shard, Incarnation: m.inc, Epoch: rec.Epoch}, nil
	}
	if !rec.Free() {
		live, err := m.alive(ctx, rec.Owner, rec.Incarnation)
		if err != nil {
			return fail(err)
		}
		if live {
			return fail(fmt.Errorf("%w: %s", ErrOwned, rec.Owner))
		}
	}
	res, err := acquireScript.Run(ctx, m.cfg.Client, []string{m.keys.shard(shard)},
		rec.Incarnation, strconv.FormatUint(rec.Epoch, 10), m.cfg.ID, m.inc).StringSlice()
	if err != nil {
		return fail(err)
	}
	if len(res) != 2 {
		return fail(fmt.Errorf("acquire script gave %d values, want 2", len(res)))
	}
	epoch, err := strconv.ParseUint(res[1], 10, 64)
	if err != nil {
		return fail(fmt.Errorf("epoch %q: %w", res[1], err))
	}
	if res[0] != "1" {
		return fail(fmt.Errorf("%w: epoch %d, was %d", ErrChanged, epoch, rec.Epoch))
	}
	return Fence{Shard: shard, Incarnation: m.inc, Epoch: epoch}, nil
}

// Release clears the owner of f.Shard if the record still holds f, keeping
// the epoch. The caller must have stopped acting for the shard before:
// the moment the record is free, another member may take it. ErrChanged
// when the record no longer holds f.
func (m *Member) Release(ctx context.Context, f Fence) error {
	ok, err := releaseScript.Run(ctx, m.cfg.Client, []string{m.keys.shard(f.Shard)}, f.Args()...).Bool()
	if err != nil {
		return fmt.Errorf("cluster: release shard %d: %w", f.Shard, err)
	}
	if !ok {
		return fmt.Errorf("cluster: release shard %d at epoch %d: %w", f.Shard, f.Epoch, ErrChanged)
	}
	return nil
}
