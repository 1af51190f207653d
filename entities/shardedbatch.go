package entities

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"

	"github.com/trellis-go/trellis/internal/cluster"
)

// Update is one command's new state in a batch of writes of one entity
// ([BatchStore]).
type Update struct {
	Data []byte
	// TraceContext is the command's trace context (tracing.CaptureForLink's
	// form, "" for none), kept with its change.
	TraceContext string
	// Applied is the command's applied record, nil for none: when one of
	// a batch's records is kept already, nothing is written and the
	// batch fails with an *AlreadyAppliedError (of no answer: the
	// commands are to run one at a time).
	Applied *Applied
}

// BatchStore is a [FencedStore] that writes several updates of one entity
// in one call. An entity type started with a Host.Cluster over one runs
// the commands that queued behind each other for one entity together,
// each on the state the ones before it left, and writes what they updated
// at once; their replies wait for that write.
type BatchStore interface {
	FencedStore
	// SaveFencedBatch writes updates, in order, under f, over the stored
	// revision expected: each gets its revision, and its change when a
	// consumer registered; the entity's state is the last one. The entity
	// must exist (a create goes alone, through SaveFenced): otherwise it
	// is a conflict, and nothing is written. It returns the updates'
	// revisions. At least one update.
	SaveFencedBatch(ctx context.Context, f Fence, entityType, id string, updates []Update, expected uint64) ([]uint64, error)
}

//go:embed shardedsavebatch.lua
var shardedSaveBatchLua string

var shardedSaveBatch = cluster.FencedScript(counterLua + "\n" + changeLua + "\n" + appliedLua + "\n" + shardedSaveBatchLua)

var _ BatchStore = (*ShardedRedisStore)(nil)

// SaveFencedBatch implements [BatchStore] in one script: the revisions are
// drawn from the shard's counter, the changes go to the shard's log.
func (s *ShardedRedisStore) SaveFencedBatch(ctx context.Context, f Fence, entityType, id string,
	updates []Update, expected uint64) ([]uint64, error) {
	const op = "save"
	keys, err := s.fencedKeys(f, entityType, id)
	if err != nil {
		return nil, opErr(op, entityType, id, err)
	}
	args := f.AppendArgs(make([]any, 0, 6+5*len(updates)))
	args = append(args, strconv.FormatUint(expected, 10), entityType, id, s.limit)
	for _, u := range updates {
		args = append(args, u.Data, u.TraceContext)
		args = appendApplied(args, u.Applied)
	}
	res, err := s.batch.Run(ctx, shardedSaveBatch, keys, args...).Slice()
	if err != nil {
		return nil, redisWriteErr(s.client, op, entityType, id, err)
	}
	bad := func() ([]uint64, error) {
		return nil, opErr(op, entityType, id, fmt.Errorf("unexpected reply %v", res))
	}
	code, _ := res[0].(int64)
	switch {
	case code == scriptApplied && len(res) == 1:
		return nil, alreadyApplied(op, entityType, id, nil)
	case code == scriptFenced && len(res) == 1:
		return nil, opErr(op, entityType, id, fmt.Errorf("refused by the fence of shard %d (epoch %d): %w", f.Shard, f.Epoch, ErrFenced))
	case code == scriptConflict && len(res) == 2:
		found, err := parseRevision(fmt.Sprint(res[1]))
		if err != nil {
			return bad()
		}
		return nil, conflictErr(op, entityType, id, expected, found)
	case code != scriptDone || len(res) != 1+3*len(updates):
		return bad()
	}
	revs := make([]uint64, len(updates))
	for i, u := range updates {
		revText, _ := res[1+3*i].(string)
		if revs[i], err = parseRevision(revText); err != nil {
			return bad()
		}
		if res[2+3*i] == "" { // not recorded: no consumer registered
			continue
		}
		seq, at, ok := parseChangeStamp(res[2+3*i], res[3+3*i])
		if !ok {
			return bad()
		}
		s.watches.notify(f.Shard, Change{Seq: seq, EntityType: entityType, EntityID: id, Revision: revs[i],
			Data: cloneData(u.Data), At: at, TraceContext: u.TraceContext})
	}
	return revs, nil
}
