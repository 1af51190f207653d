package views

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"time"
)

// Event is one event of a followed query (Runner.Follow).
type Event struct {
	// Kind is what happened:
	//   - "row": a row of the result as following began (or began anew
	//     after a "reset"); the rows come in the query's order;
	//   - "ready": every row of the result was sent; changes follow;
	//   - "added", "changed", "removed": a row entered the result, changed
	//     in it (its data, or its place in the order), or left it;
	//   - "reset": the changes since the cursor can no longer be told (the
	//     shard's rows were built anew, or the cursor is older than the
	//     changes kept): drop the rows; the result's rows follow anew;
	//   - "": no event, only a newer ID to resume from.
	Kind string
	// ID is the cursor to resume after this event with (Last-Event-ID);
	// "" for "row" and "reset" events: a stream cut before its "ready"
	// starts over.
	ID string
	// EntityID is the row's entity; Row its data (for "row", "added" and
	// "changed").
	EntityID string
	Row      json.RawMessage
	// Position is the change's position, "<shard>.<seq>" (for "added",
	// "changed" and "removed"): a client that sees the change of a row at a
	// position at or before the last it applied for that row has seen it.
	Position string
}

// Limits of a stream.
const (
	// MaxStreamRows is the most rows a followed result may hold as its
	// stream begins: a larger one ends the stream with ErrTooLarge.
	MaxStreamRows = 10_000
	// feedBatch is how many changes of a shard a stream reads at once.
	feedBatch = 100
	// keepAliveEvery is how often an idle stream sends its newest cursor.
	keepAliveEvery = 15 * time.Second
)

// ErrTooLarge ends a stream whose result holds more than MaxStreamRows
// rows.
var ErrTooLarge = fmt.Errorf("views: the result holds more than %d rows to follow", MaxStreamRows)

// Follower follows one query's result: see Runner.Follow.
type Follower struct {
	r      *Runner
	view   *viewDef // the view as started
	d      *viewDef // the generation followed
	reset  bool     // the cursor was of another generation: begin with a reset
	qi     int
	s      *scan
	key    []byte
	cursor []uint64 // each shard's feed position; nil until the rows were sent
}

// Follow checks a request to follow query of view (Params, Min and Max;
// Limit, Token and After are not used) and lastEventID, the ID of the last
// event a client had ("" to begin), and returns the follower, which Run
// runs. A lastEventID that is not one of this query's is refused with
// ErrBadToken naming "Last-Event-ID".
func (r *Runner) Follow(ctx context.Context, view, query string, req Request, lastEventID string) (*Follower, error) {
	req.Limit, req.Token, req.After = 0, "", ""
	d, qi, s, err := r.plan(view, query, req)
	if err != nil {
		return nil, err
	}
	s.limit = d.queries[qi].maxLimit
	key, err := r.sealKey(ctx)
	if err != nil {
		return nil, err
	}
	f := &Follower{r: r, view: d, qi: qi, s: s, key: key}
	if f.d, err = r.answering(ctx, d, qi); err != nil {
		return nil, err
	}
	if lastEventID != "" {
		var gen string
		if f.cursor, gen, err = f.parseCursor(lastEventID); err != nil {
			return nil, err
		}
		if gen != f.d.gen {
			f.cursor, f.reset = nil, true
		}
	}
	return f, nil
}

// Run sends the result's rows (unless the follower resumes after a
// cursor), then every change to the result, to emit, a batch of events at
// a time, until ctx ends (it returns nil then), emit fails, or the store
// does (it returns their error). Within a shard the changes come in the
// order of their positions; changes of two shards (of two entities) in
// any order.
func (f *Follower) Run(ctx context.Context, emit func([]Event) error) error {
	if f.reset {
		if err := emit([]Event{{Kind: "reset"}}); err != nil {
			return f.end(ctx, err)
		}
	}
	if f.cursor == nil {
		if err := f.sendRows(ctx, emit); err != nil {
			return f.end(ctx, err)
		}
	}
	sentAt, sent := time.Now(), f.encodeCursor()
	for {
		wake := f.r.appliedChan()
		feeds, err := f.r.cfg.Store.feed(ctx, f.d, f.cursor, feedBatch)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// The store may be back in a moment: the stream waits, and
			// reads from the same cursor.
			f.r.log.Warn("views: a stream could not read the changes", "view", f.view.name, "err", err.Error())
			if !f.pause(ctx, time.Second, nil) {
				return nil
			}
			continue
		}
		swapped := false
		if g, err := f.r.answering(ctx, f.view, f.qi); err == nil && g.gen != f.d.gen {
			f.d, swapped = g, true
		}
		if swapped || f.stale(feeds) {
			if err := emit([]Event{{Kind: "reset"}}); err != nil {
				return f.end(ctx, err)
			}
			if err := f.sendRows(ctx, emit); err != nil {
				return f.end(ctx, err)
			}
			sentAt, sent = time.Now(), f.encodeCursor()
			continue
		}
		var evs []Event
		full := false
		for shard, sf := range feeds {
			for _, c := range sf.changes {
				f.cursor[shard] = c.seq
				kind := feedKind(c, f.qi, f.s)
				if kind == "" {
					continue
				}
				ev := Event{Kind: kind, ID: f.encodeCursor(), EntityID: c.id, Position: Position{Shard: shard, Seq: c.seq}.String()}
				if kind != "removed" {
					ev.Row = c.row
				}
				evs = append(evs, ev)
			}
			if len(sf.changes) == feedBatch {
				full = true
			} else {
				f.cursor[shard] = max(f.cursor[shard], sf.pos)
			}
		}
		if len(evs) == 0 && time.Since(sentAt) >= keepAliveEvery {
			if id := f.encodeCursor(); id != sent {
				evs = append(evs, Event{ID: id})
			}
		}
		if len(evs) > 0 {
			if err := emit(evs); err != nil {
				return f.end(ctx, err)
			}
			sentAt, sent = time.Now(), evs[len(evs)-1].ID
		}
		if full {
			continue
		}
		if !f.pause(ctx, f.r.cfg.Poll, wake) {
			return nil
		}
	}
}

// pause waits for d, or wake; it is false when ctx ended first.
func (f *Follower) pause(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-wake:
	case <-t.C:
	}
	return true
}

// end is Run's result for err: nil once ctx ended.
func (f *Follower) end(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// stale reports whether a shard's feed cannot tell every change after the
// cursor: its floor passed it (trimmed, or the rows built anew), or the
// view is behind the cursor (its rows were lost and built again).
func (f *Follower) stale(feeds []shardFeed) bool {
	for shard, sf := range feeds {
		if sf.floor > f.cursor[shard] || sf.pos < f.cursor[shard] {
			return true
		}
	}
	return false
}

// sendRows sends every row of the result, then "ready" with the cursor:
// each shard's position the rows were read at. It first waits for the
// shards still being built (awaitBuilt).
func (f *Follower) sendRows(ctx context.Context, emit func([]Event) error) error {
	if err := f.awaitBuilt(ctx); err != nil {
		return err
	}
	var tok *token
	var cursor []uint64 // each shard's position the first page was read at
	count := 0
	for {
		rows, next, pos, err := f.r.read(ctx, f.d, f.qi, f.s, tok, tok == nil)
		if err != nil {
			return err
		}
		if count += len(rows); count > MaxStreamRows {
			return ErrTooLarge
		}
		evs := make([]Event, len(rows), len(rows)+1)
		for i, e := range rows {
			evs[i] = Event{Kind: "row", EntityID: e.id, Row: e.row}
		}
		if tok == nil {
			cursor = pos
		}
		if next == nil {
			f.cursor = cursor
			evs = append(evs, Event{Kind: "ready", ID: f.encodeCursor()})
		}
		if err := emit(evs); err != nil {
			return err
		}
		if next == nil {
			return nil
		}
		tok = next
	}
}

// cursorVersion is the first byte of a cursor's payload.
const cursorVersion = 1

// queryHash names the query and its parameters in a cursor.
func (f *Follower) queryHash() uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(f.d.queries[f.qi].name))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write(binary.BigEndian.AppendUint64(nil, f.s.hash()))
	return h.Sum64()
}

// encodeCursor is the cursor as an event's ID: the version, the query's
// hash, the generation followed, then each shard with a position (the distance from the shard
// before, and the position), sealed.
func (f *Follower) encodeCursor() string {
	b := []byte{cursorVersion}
	b = binary.BigEndian.AppendUint64(b, f.queryHash())
	b = binary.AppendUvarint(b, uint64(len(f.d.gen)))
	b = append(b, f.d.gen...)
	prev := -1
	for shard, pos := range f.cursor {
		if pos > 0 {
			b = binary.AppendUvarint(b, uint64(shard-prev))
			b = binary.AppendUvarint(b, pos)
			prev = shard
		}
	}
	return seal(f.key, "cursor", f.view.name, b)
}

// parseCursor reads an event's ID of this follower's query: each shard's
// position, and the generation followed.
func (f *Follower) parseCursor(text string) ([]uint64, string, error) {
	b, ok := unseal(f.key, "cursor", f.view.name, text)
	bad := func(why string) error {
		return refuse(ErrBadToken, "Last-Event-ID", "%s (take the id of the last event received, as it is)", why)
	}
	if !ok {
		return nil, "", bad("not an event id of a stream of view " + f.view.name + " of this service")
	}
	if len(b) < 10 || b[0] != cursorVersion {
		return nil, "", bad("not an event id of this version of the service")
	}
	if binary.BigEndian.Uint64(b[1:9]) != f.queryHash() {
		return nil, "", bad("an event id of another query, or other parameters")
	}
	n, w := binary.Uvarint(b[9:])
	if w <= 0 || n > uint64(len(b)-9-w) {
		return nil, "", bad("a malformed event id")
	}
	gen := string(b[9+w : 9+w+int(n)])
	cursor := make([]uint64, numShards)
	shard := -1
	for rest := b[9+w+int(n):]; len(rest) > 0; {
		delta, n := binary.Uvarint(rest)
		if n <= 0 || delta == 0 || delta > numShards {
			return nil, "", bad("a malformed event id")
		}
		rest = rest[n:]
		pos, m := binary.Uvarint(rest)
		if shard += int(delta); m <= 0 || shard >= numShards {
			return nil, "", bad("a malformed event id")
		}
		cursor[shard], rest = pos, rest[m:]
	}
	return cursor, gen, nil
}

// appliedChan is closed when a projector of this instance next applies a
// batch.
func (r *Runner) appliedChan() <-chan struct{} {
	r.appliedMu.Lock()
	defer r.appliedMu.Unlock()
	return r.applied
}

// noteApplied wakes the streams waiting for a batch.
func (r *Runner) noteApplied() {
	r.appliedMu.Lock()
	defer r.appliedMu.Unlock()
	close(r.applied)
	r.applied = make(chan struct{})
}
