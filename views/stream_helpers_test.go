package views_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/trellistest"
)

// sseEvent is one event of a stream as a client reads it.
type sseEvent struct {
	kind, id string
	hasID    bool
	data     struct {
		ID       string   `json:"id"`
		Row      orderRow `json:"row"`
		Position string   `json:"position"`
		Detail   string   `json:"detail"`
	}
}

// follower reads a stream over HTTP as an SSE client does: it keeps the
// last event id, and reconnects with it when a stream ends.
type follower struct {
	t      testing.TB
	ts     *trellistest.Service
	path   string
	lastID string

	events chan sseEvent
	cancel context.CancelFunc
	done   chan struct{}
	ends   atomic.Int32 // streams that ended, and were resumed unless stopped
}

// follow opens path on ts and reads its events until stop.
func follow(t testing.TB, ts *trellistest.Service, path, lastID string) *follower {
	t.Helper()
	f := &follower{t: t, ts: ts, path: path, lastID: lastID, events: make(chan sseEvent, 1024), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	go f.run(ctx)
	t.Cleanup(f.stop)
	return f
}

// stop disconnects, and waits for the reader to end.
func (f *follower) stop() {
	f.cancel()
	<-f.done
}

func (f *follower) run(ctx context.Context) {
	defer close(f.done)
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.ts.URL+f.path, nil)
		if err != nil {
			f.t.Errorf("stream request: %v", err)
			return
		}
		req.Header.Set("Accept", "text/event-stream")
		if f.lastID != "" {
			req.Header.Set("Last-Event-ID", f.lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				f.t.Errorf("stream: %v", err)
			}
			return
		}
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			f.t.Errorf("stream: %s %s", resp.Status, resp.Header.Get("Content-Type"))
			resp.Body.Close()
			return
		}
		f.read(ctx, bufio.NewScanner(resp.Body))
		resp.Body.Close()
		f.ends.Add(1)
	}
}

// read parses events as the SSE format has them, and keeps the last id.
func (f *follower) read(ctx context.Context, sc *bufio.Scanner) {
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var ev sseEvent
	var data string
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if ev.hasID {
				f.lastID = ev.id
			}
			if ev.kind != "" {
				if data != "" {
					if err := json.Unmarshal([]byte(data), &ev.data); err != nil {
						f.t.Errorf("event %s: data %q: %v", ev.kind, data, err)
					}
				}
				select {
				case f.events <- ev:
				case <-ctx.Done():
					return
				}
			}
			ev, data = sseEvent{}, ""
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "event":
			ev.kind = value
		case "id":
			ev.id, ev.hasID = value, true
		case "data":
			data += value
		}
	}
}

// client is a follower's picture of the result: the rows it applied, and
// each row's last change's position.
type client struct {
	rows  map[string]orderRow
	last  map[string]string
	ready bool
}

func newClient() *client {
	return &client{rows: make(map[string]orderRow), last: make(map[string]string)}
}

// apply applies ev; it fails t on an event that repeats one applied (a
// duplicate) or on a reset when resets are not expected.
func (c *client) apply(t testing.TB, ev sseEvent, resets bool) {
	t.Helper()
	d := ev.data
	switch ev.kind {
	case "row":
		c.rows[d.ID] = d.Row
	case "ready":
		c.ready = true
	case "reset":
		if !resets {
			t.Fatalf("a reset: the stream could not resume")
		}
		clear(c.rows)
		c.ready = false
	case "added", "changed", "removed":
		if !c.ready {
			t.Fatalf("%s %s before ready", ev.kind, d.ID)
		}
		if prev, ok := c.last[d.ID]; ok && !after(d.Position, prev) {
			t.Fatalf("%s %s at %s: a duplicate (its last change was at %s)", ev.kind, d.ID, d.Position, prev)
		}
		c.last[d.ID] = d.Position
		if ev.kind == "removed" {
			delete(c.rows, d.ID)
		} else {
			c.rows[d.ID] = d.Row
		}
	case "error":
		t.Fatalf("the stream failed: %+v", d)
	}
}

// after reports whether position a ("<shard>.<seq>") is after b, of the
// same entity's shard.
func after(a, b string) bool {
	_, sa, _ := strings.Cut(a, ".")
	_, sb, _ := strings.Cut(b, ".")
	return len(sa) > len(sb) || len(sa) == len(sb) && sa > sb
}

// until applies f's events until the client's rows equal want, or fails
// after waitLong.
func (c *client) until(t testing.TB, f *follower, want map[string]orderRow, resets bool) {
	t.Helper()
	deadline := time.NewTimer(waitLong)
	defer deadline.Stop()
	for !c.ready || !equalRows(c.rows, want) {
		select {
		case ev := <-f.events:
			c.apply(t, ev, resets)
		case <-deadline.C:
			t.Fatalf("the stream's rows %v, want %v", c.rows, want)
		}
	}
}

func equalRows(a, b map[string]orderRow) bool {
	if len(a) != len(b) {
		return false
	}
	for id, r := range a {
		if w, ok := b[id]; !ok || w != r {
			return false
		}
	}
	return true
}
