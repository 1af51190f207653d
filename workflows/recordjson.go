package workflows

import (
	"encoding/json"
	"time"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/jsonappend"
)

// AppendJSON appends the record's JSON, the bytes json.Marshal writes for
// it, field by field: a record is written at every transition, and
// encoding/json's reflection (a time's MarshalJSON and a scan of its
// output for each of the history's times) was most of a write's cost. A
// record whose State, Input or lapse input json.Marshal would not copy as
// they are (jsonappend.Plain), or with a time json.Marshal refuses, is
// left to json.Marshal.
func (rec *record) AppendJSON(b []byte) ([]byte, error) {
	if out, ok := rec.appendJSON(b); ok {
		return out, nil
	}
	type plain record // no AppendJSON: encoding/json's own encoding
	data, err := json.Marshal((*plain)(rec))
	return append(b, data...), err
}

var _ entities.StateAppender = (*record)(nil)

// appendJSON is AppendJSON's own encoding; false when it must be left to
// json.Marshal.
func (rec *record) appendJSON(b []byte) ([]byte, bool) {
	if b == nil {
		// Room for the whole: the fixed fields, the raw ones, and an
		// entry of the history with its two times in about 150 bytes.
		b = make([]byte, 0, 320+len(rec.State)+len(rec.Input)+150*len(rec.History))
	}
	w := objectWriter{b: b, ok: true}
	w.open()
	w.raw("state", rec.State)
	w.str("status", string(rec.Status))
	w.str("run", rec.Run)
	w.str("step", rec.Step)
	w.raw("input", rec.Input)
	w.int("attempt", rec.Attempt)
	w.uint("transition", rec.Transition)
	w.uint("entered", rec.Entered)
	w.time("enteredAt", rec.EnteredAt, false)
	if rec.Suspended {
		w.key("suspended")
		w.b = append(w.b, "true"...)
	}
	w.time("notBefore", rec.NotBefore, false)
	w.time("pauseUntil", rec.PauseUntil, false)
	if rec.OnLapse != nil {
		w.key("onLapse")
		outer := w.open()
		w.key("step")
		w.b = jsonappend.String(w.b, rec.OnLapse.Step)
		w.raw("input", rec.OnLapse.Input)
		w.close(outer)
	}
	w.time("deadline", rec.Deadline, false)
	w.str("error", rec.Error)
	w.str("trace", rec.Trace)
	w.str("pausedBy", rec.PausedBy)
	if len(rec.History) > 0 {
		w.key("history")
		w.b = append(w.b, '[')
		for i, e := range rec.History {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			outer := w.open()
			w.key("transition")
			w.b = jsonappend.Uint(w.b, e.Transition)
			w.str("step", e.Step)
			w.int("attempt", e.Attempt)
			w.key("outcome")
			w.b = jsonappend.String(w.b, e.Outcome)
			w.str("error", e.Error)
			w.time("started", e.Started, false)
			w.time("at", e.At, true)
			w.close(outer)
		}
		w.b = append(w.b, ']')
	}
	w.close(false)
	return w.b, w.ok
}

// objectWriter appends JSON objects, their fields as encoding/json writes
// a struct's: a comma before each but the first, omitempty and omitzero
// fields left out when empty. ok turns false at a value it cannot write
// as json.Marshal would.
type objectWriter struct {
	b    []byte
	some bool // a field of the open object was written
	ok   bool
}

// open opens an object (the record, or a value of one of its fields);
// outer is what close restores.
func (w *objectWriter) open() (outer bool) {
	w.b = append(w.b, '{')
	outer, w.some = w.some, false
	return outer
}

// close closes the object open opened.
func (w *objectWriter) close(outer bool) {
	w.b = append(w.b, '}')
	w.some = outer
}

// key appends the opening of field name.
func (w *objectWriter) key(name string) {
	if w.some {
		w.b = append(w.b, ',')
	}
	w.some = true
	w.b = append(w.b, '"')
	w.b = append(w.b, name...)
	w.b = append(w.b, '"', ':')
}

// str appends an omitempty string field.
func (w *objectWriter) str(name, s string) {
	if s != "" {
		w.key(name)
		w.b = jsonappend.String(w.b, s)
	}
}

// int appends an omitempty int field.
func (w *objectWriter) int(name string, n int) {
	if n != 0 {
		w.key(name)
		w.b = jsonappend.Int(w.b, n)
	}
}

// uint appends an omitempty unsigned field.
func (w *objectWriter) uint(name string, u uint64) {
	if u != 0 {
		w.key(name)
		w.b = jsonappend.Uint(w.b, u)
	}
}

// raw appends an omitempty json.RawMessage field.
func (w *objectWriter) raw(name string, raw json.RawMessage) {
	if len(raw) == 0 {
		return
	}
	if !jsonappend.Plain(raw) {
		w.ok = false
		return
	}
	w.key(name)
	w.b = append(w.b, raw...)
}

// time appends a time field: omitzero unless always.
func (w *objectWriter) time(name string, t time.Time, always bool) {
	if t.IsZero() && !always {
		return
	}
	w.key(name)
	var ok bool
	if w.b, ok = jsonappend.Time(w.b, t); !ok {
		w.ok = false
	}
}
