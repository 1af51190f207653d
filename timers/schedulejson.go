package timers

import (
	"encoding/json"
	"time"
)

// scheduleWire is a Schedule's JSON: durations as Go duration strings
// ("90s", "1h30m"), times in RFC 3339, empty fields left out. It is the
// form of the export lines and of the stored recurrence.
type scheduleWire struct {
	Every         string        `json:"every,omitempty"`
	Cron          string        `json:"cron,omitempty"`
	TimeZone      string        `json:"timeZone,omitempty"`
	Start         time.Time     `json:"start,omitzero"`
	End           time.Time     `json:"end,omitzero"`
	Jitter        string        `json:"jitter,omitempty"`
	Overlap       OverlapPolicy `json:"overlap,omitempty"`
	CatchUp       CatchUpPolicy `json:"catchUp,omitempty"`
	CatchUpWindow string        `json:"catchUpWindow,omitempty"`
}

// MarshalJSON writes s with its durations as Go duration strings.
func (s Schedule) MarshalJSON() ([]byte, error) {
	dur := func(d time.Duration) string {
		if d == 0 {
			return ""
		}
		return d.String()
	}
	return json.Marshal(scheduleWire{
		Every: dur(s.Every), Cron: s.Cron, TimeZone: s.TimeZone, Start: s.Start, End: s.End, Jitter: dur(s.Jitter),
		Overlap: s.Overlap, CatchUp: s.CatchUp, CatchUpWindow: dur(s.CatchUpWindow),
	})
}

// UnmarshalJSON reads what MarshalJSON writes; a duration that does not
// parse is a *ScheduleError naming its field.
func (s *Schedule) UnmarshalJSON(b []byte) error {
	var w scheduleWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	out := Schedule{Cron: w.Cron, TimeZone: w.TimeZone, Start: w.Start, End: w.End, Overlap: w.Overlap, CatchUp: w.CatchUp}
	for _, d := range []struct {
		field, text string
		dst         *time.Duration
	}{{"every", w.Every, &out.Every}, {"jitter", w.Jitter, &out.Jitter}, {"catchUpWindow", w.CatchUpWindow, &out.CatchUpWindow}} {
		if d.text == "" {
			continue
		}
		v, err := time.ParseDuration(d.text)
		if err != nil {
			return &ScheduleError{Field: d.field, Reason: "must be a Go duration such as 30s, 5m or 1h30m"}
		}
		*d.dst = v
	}
	*s = out
	return nil
}
