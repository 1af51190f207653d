package views

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/trellis-go/trellis/api"
)

// streamMargin is how long before its request's deadline a stream ends,
// so that it ends cleanly, and the client resumes it.
const streamMargin = time.Second

// retryMillis is how soon a client reconnects to a stream that ended (the
// SSE retry field).
const retryMillis = 200

// ServeStream answers r with the query's result followed live, as
// Server-Sent Events (see Runner.ServeStream).
func (q *Query[R]) ServeStream(w http.ResponseWriter, r *http.Request, run *Runner, req Request) {
	run.ServeStream(w, r, q.view.name, q.def.name, req)
}

// ServeStream answers r with query of view followed live, as Server-Sent
// Events (text/event-stream): the result's rows ("row" events, then
// "ready"), then each change to the result ("added", "changed",
// "removed"), each an Event whose data is {"id", "row", "position"} in
// JSON. Every event after the rows carries an id: a client that
// reconnects with it as Last-Event-ID (EventSource does so itself)
// resumes after that event, missing none. A stream ends a second before
// its request's deadline (the service's request timeout), and tells the
// client to reconnect within 200 ms.
//
// Bad input (a parameter, the query, Last-Event-ID) is answered before
// the stream begins, with a 400 problem naming it; a store that cannot be
// reached, with a 503.
func (r *Runner) ServeStream(w http.ResponseWriter, req *http.Request, view, query string, q Request) {
	ctx := req.Context()
	f, err := r.Follow(ctx, view, query, q, req.Header.Get("Last-Event-ID"))
	if err != nil {
		api.WriteError(w, req, err)
		return
	}
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-streamMargin))
		defer cancel()
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // proxies: do not hold the events back
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	bw := bufio.NewWriter(w)
	_, _ = fmt.Fprintf(bw, "retry: %d\n\n", retryMillis)
	emit := func(evs []Event) error {
		for _, ev := range evs {
			writeEvent(bw, ev)
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		return rc.Flush()
	}
	if err := emit(nil); err != nil {
		return
	}
	if err := f.Run(ctx, emit); err != nil && !errors.Is(err, context.Canceled) {
		r.log.Warn("views: a stream ended on an error", "view", view, "query", query, "err", err.Error())
		data, _ := json.Marshal(map[string]string{"detail": err.Error()})
		_, _ = bw.WriteString("event: error\ndata: ")
		_, _ = bw.Write(data)
		_, _ = bw.WriteString("\n\n")
		_ = emit(nil)
	}
}

// eventData is an event's data in a stream.
type eventData struct {
	ID       string          `json:"id,omitempty"`
	Row      json.RawMessage `json:"row,omitempty"`
	Position string          `json:"position,omitempty"`
}

// writeEvent writes ev in the SSE format. An event of no kind is its id
// alone: EventSource takes the id and dispatches nothing.
func writeEvent(w *bufio.Writer, ev Event) {
	if ev.Kind != "" {
		_, _ = w.WriteString("event: " + ev.Kind + "\n")
	}
	if ev.ID != "" || ev.Kind == "reset" {
		_, _ = w.WriteString("id: " + ev.ID + "\n")
	}
	if ev.Kind != "" {
		data, _ := json.Marshal(eventData{ID: ev.EntityID, Row: ev.Row, Position: ev.Position}) // plain fields and JSON rows: never fails
		_, _ = w.WriteString("data: ")
		_, _ = w.Write(data)
		_, _ = w.WriteString("\n")
	}
	_, _ = w.WriteString("\n")
}
