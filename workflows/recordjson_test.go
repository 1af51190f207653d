package workflows

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// fullRecord has every field of a record, its lapse and its history's
// entries set (TestRecordJSONCoversEveryField keeps it so).
func fullRecord() record {
	at := time.Date(2026, 11, 28, 18, 31, 54, 123456789, time.UTC)
	zone := time.FixedZone("east", 5*3600+30*60)
	return record{
		State: json.RawMessage(`{"n":3,"name":"a b","q":"say \"hi\""}`), Status: StatusPaused,
		Run: "0192d7a0-3c4f", Step: "approve", Input: json.RawMessage(`[1,{"x":null}]`), Attempt: 2,
		Transition: 9, Entered: 7, EnteredAt: at.Add(-time.Minute), Suspended: true, NotBefore: at, PauseUntil: at.In(zone).Add(time.Hour),
		OnLapse:  &Target{Step: "expire", Input: json.RawMessage(`"late"`)},
		Deadline: at.Add(24 * time.Hour), Error: `step "charge" panicked: <nil> & more`,
		Trace: "00-abc-def-01", PausedBy: "00-123-456-01",
		History: []Entry{
			{Transition: 6, Step: "charge", Attempt: 1, Outcome: "retry", Error: "refused\n\tby the bank",
				Started: at.Add(-time.Second), At: at},
			{Transition: 7, Outcome: "to approve", At: at.In(zone)},
		},
	}
}

// TestRecordJSON: AppendJSON writes the very bytes json.Marshal writes for
// a record, and appends them to what b held.
func TestRecordJSON(t *testing.T) {
	full := fullRecord()
	cases := []struct {
		name string
		rec  record
		own  bool // written by appendJSON, not left to json.Marshal
	}{
		{"empty", record{}, true},
		{"full", full, true},
		{"running", record{State: json.RawMessage(`{"n":1}`), Status: StatusRunning, Run: "r", Step: "b",
			Input: json.RawMessage(`null`), Transition: 2, Entered: 2, History: full.History[1:]}, true},
		{"text past ASCII", record{Step: "é 中文 🎉", Error: "line\u2028sep", Trace: "bad\xffutf8", State: json.RawMessage(`"é"`)}, true},
		{"lapse with no input", record{Status: StatusPaused, OnLapse: &Target{Step: "x"}}, true},
		{"zero started, zero at", record{History: []Entry{{Transition: 1, Outcome: "ended"}}}, true},
		{"state json.Marshal compacts", record{State: json.RawMessage(`{"n": 1}`)}, false},
		{"state json.Marshal escapes", record{State: json.RawMessage(`{"html":"<b>"}`)}, false},
		{"input json.Marshal escapes", record{Input: json.RawMessage("\"\u2028\"")}, false},
		{"lapse input json.Marshal compacts", record{OnLapse: &Target{Step: "x", Input: json.RawMessage("[1,\n2]")}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			type plain record
			want, err := json.Marshal((*plain)(&c.rec))
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.rec.AppendJSON([]byte("x"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, append([]byte("x"), want...)) {
				t.Errorf("AppendJSON:\n got x%s\nwant x%s", got[1:], want)
			}
			if _, own := c.rec.appendJSON(nil); own != c.own {
				t.Errorf("written by appendJSON: %v, want %v", own, c.own)
			}
		})
	}
}

// TestRecordJSONRefused: a record json.Marshal refuses (a time it cannot
// write) is refused with json.Marshal's error.
func TestRecordJSONRefused(t *testing.T) {
	rec := record{Deadline: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := rec.AppendJSON(nil); err == nil {
		t.Error("a deadline past year 9999 was written")
	}
}

// TestRecordJSONCoversEveryField: fullRecord sets every field of a
// record, an Entry and a Target, so that TestRecordJSON compares each:
// a field added to them without AppendJSON writing it fails here.
func TestRecordJSONCoversEveryField(t *testing.T) {
	full := fullRecord()
	check := func(v reflect.Value) {
		for i := range v.NumField() {
			if v.Field(i).IsZero() {
				t.Errorf("fullRecord leaves %s.%s zero: set it, and have AppendJSON write it", v.Type().Name(), v.Type().Field(i).Name)
			}
		}
	}
	check(reflect.ValueOf(full))
	check(reflect.ValueOf(*full.OnLapse))
	check(reflect.ValueOf(full.History[0]))
}
