package views

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/trellis-go/trellis/internal/cluster"
)

// Position is a place in a shard's change log: a view that applied it
// shows every change recorded there up to it.
type Position struct {
	Shard int
	Seq   uint64
}

// String is the position as a query's Request.After takes it:
// "<shard>.<seq>".
func (p Position) String() string { return strconv.Itoa(p.Shard) + "." + strconv.FormatUint(p.Seq, 10) }

// ParsePosition reads a Position's String.
func ParsePosition(text string) (Position, error) {
	shardText, seqText, ok := strings.Cut(text, ".")
	shard, err1 := strconv.Atoi(shardText)
	seq, err2 := strconv.ParseUint(seqText, 10, 64)
	if !ok || err1 != nil || err2 != nil || shard < 0 || shard >= numShards {
		return Position{}, refuse(ErrBadPosition, "after", "%q is not a change position (<shard>.<seq>, shard 0 to %d)", text, numShards-1)
	}
	return Position{Shard: shard, Seq: seq}, nil
}

// Written is the position of the last change recorded in the shard of
// the entity entityType id: once a command on that entity has replied,
// its change is at or before it. An endpoint returns it with a command's
// reply, for a query that must see the command's change (Request.After).
func (r *Runner) Written(ctx context.Context, entityType, id string) (Position, error) {
	if r.cfg.Log == nil {
		return Position{}, fmt.Errorf("views: %w: %s", ErrNoChangeLog, r.cfg.NoLog)
	}
	shard := cluster.ShardOf(entityType, id)
	_, head, _, err := r.cfg.Log.Changes(ctx, shard, 0, 1)
	if err != nil {
		return Position{}, err
	}
	return Position{Shard: shard, Seq: head}, nil
}

// Waits for a position.
const (
	// DefaultWait is how long a query waits for Request.After when
	// Request.Wait is zero.
	DefaultWait = 5 * time.Second
	// MaxWait is the longest a query waits for it.
	MaxWait = 30 * time.Second
)

// waitFor waits until generation gen applied the position after (text),
// bounded by wait and ctx.
func (r *Runner) waitFor(ctx context.Context, gen, after string, wait time.Duration) error {
	pos, err := ParsePosition(after)
	if err != nil {
		return err
	}
	wait = min(cmp.Or(wait, DefaultWait), MaxWait)
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return r.waitGen(ctx, gen, pos)
}

// WaitFor waits until view (the generation of it that answers) applied
// pos, or ctx ends: then it returns an error wrapping ErrBehind and ctx's
// error.
func (r *Runner) WaitFor(ctx context.Context, view string, pos Position) error {
	d, err := r.view(view)
	if err != nil {
		return err
	}
	g, err := r.answeringGen(ctx, d)
	if err != nil {
		return err
	}
	return r.waitGen(ctx, cmp.Or(g.Gen, d.gen), pos)
}

// waitGen waits until generation gen applied pos, or ctx ends. It reads
// the store's position at once when nothing is known here of the shard's
// (no projector here applied it, no wait read it); else, and after, it
// waits for a projector here to apply pos, or the waits' poller to read
// it (see reached).
func (r *Runner) waitGen(ctx context.Context, view string, pos Position) error {
	at, grew := r.reached.get(view, pos.Shard)
	if at >= pos.Seq {
		return nil
	}
	if at == 0 {
		read, _, err := r.cfg.Store.position(ctx, view, pos.Shard)
		if err != nil && ctx.Err() == nil {
			return err
		}
		if read >= pos.Seq {
			return nil
		}
	}
	defer r.reached.watch(view)()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("view %s at %d on shard %d, waiting for %s: %w: %w", view, at, pos.Shard, pos, ErrBehind, ctx.Err())
		case <-grew:
		}
		if at, grew = r.reached.get(view, pos.Shard); at >= pos.Seq {
			return nil
		}
	}
}
