package timers

import (
	"errors"
	"testing"
	"time"
)

func mustTime(t *testing.T, zone, value string) time.Time {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	v, err := time.ParseInLocation("2006-01-02 15:04:05", value, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestScheduleNext checks run times across DST changes, month ends and
// leap days, for cron schedules and intervals.
func TestScheduleNext(t *testing.T) {
	paris := func(v string) time.Time { return mustTime(t, "Europe/Paris", v) }
	ny := func(v string) time.Time { return mustTime(t, "America/New_York", v) }
	utc := func(v string) time.Time { return mustTime(t, "UTC", v) }
	cases := []struct {
		name string
		s    Schedule
		from time.Time
		want []time.Time
	}{
		{"daily 02:30 across spring forward (Paris: 02:00→03:00)",
			Schedule{Cron: "30 2 * * *", TimeZone: "Europe/Paris"}, paris("2026-03-28 12:00:00"),
			// 29 March has no 02:30: that day runs as if the clocks had not changed yet.
			[]time.Time{paris("2026-03-29 03:30:00"), paris("2026-03-30 02:30:00")}},
		{"daily 02:30 across fall back (Paris: 03:00→02:00) runs once",
			Schedule{Cron: "30 2 * * *", TimeZone: "Europe/Paris"}, paris("2026-10-24 12:00:00"),
			[]time.Time{paris("2026-10-25 00:30:00").Add(2 * time.Hour), paris("2026-10-26 02:30:00")}},
		{"hourly across spring forward stays hourly in absolute time",
			Schedule{Cron: "0 * * * *", TimeZone: "America/New_York"}, ny("2026-03-08 00:30:00"),
			[]time.Time{ny("2026-03-08 01:00:00"), ny("2026-03-08 03:00:00"), ny("2026-03-08 04:00:00")}},
		{"hourly across fall back runs the repeated hour once",
			Schedule{Cron: "0 * * * *", TimeZone: "Europe/Paris"}, utc("2026-10-24 23:30:00"),
			[]time.Time{utc("2026-10-25 00:00:00"), utc("2026-10-25 02:00:00"), utc("2026-10-25 03:00:00")}},
		{"09:00 weekdays keeps local time across DST",
			Schedule{Cron: "0 9 * * MON-FRI", TimeZone: "Europe/Paris"}, paris("2026-03-27 10:00:00"),
			[]time.Time{paris("2026-03-30 09:00:00"), paris("2026-03-31 09:00:00")}},
		{"the 31st skips short months",
			Schedule{Cron: "0 0 31 * *"}, utc("2026-01-31 12:00:00"),
			[]time.Time{utc("2026-03-31 00:00:00"), utc("2026-05-31 00:00:00"), utc("2026-07-31 00:00:00")}},
		{"29 February runs in leap years only",
			Schedule{Cron: "0 12 29 2 *"}, utc("2026-01-01 00:00:00"),
			[]time.Time{utc("2028-02-29 12:00:00"), utc("2032-02-29 12:00:00")}},
		{"seconds field",
			Schedule{Cron: "*/20 * * * * *"}, utc("2026-01-01 00:00:05"),
			[]time.Time{utc("2026-01-01 00:00:20"), utc("2026-01-01 00:00:40"), utc("2026-01-01 00:01:00")}},
		{"interval anchored at start",
			Schedule{Every: 90 * time.Second, Start: utc("2026-01-01 00:00:00")}, utc("2026-01-01 00:02:00"),
			[]time.Time{utc("2026-01-01 00:03:00"), utc("2026-01-01 00:04:30")}},
		{"interval before its start begins at the start",
			Schedule{Every: time.Minute, Start: utc("2026-06-01 00:00:00")}, utc("2026-01-01 00:00:00"),
			[]time.Time{utc("2026-06-01 00:00:00"), utc("2026-06-01 00:01:00")}},
		{"end stops the runs",
			Schedule{Every: time.Hour, Start: utc("2026-01-01 00:00:00"), End: utc("2026-01-01 02:00:00")}, utc("2026-01-01 00:30:00"),
			[]time.Time{utc("2026-01-01 01:00:00"), utc("2026-01-01 02:00:00")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.s.Next(c.from, len(c.want)+1)
			if err != nil {
				t.Fatal(err)
			}
			if c.s.End.IsZero() {
				got = got[:len(c.want)]
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %d runs %v, want %v", len(got), got, c.want)
			}
			for i := range got {
				if !got[i].Equal(c.want[i]) {
					t.Errorf("run %d = %v, want %v", i, got[i].In(c.want[i].Location()), c.want[i])
				}
			}
		})
	}
}

// TestScheduleInvalid checks that each bad schedule names its field.
func TestScheduleInvalid(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		s     Schedule
		field string
	}{
		{Schedule{}, "every"},
		{Schedule{Every: time.Minute, Cron: "* * * * *"}, "every"},
		{Schedule{Every: 500 * time.Millisecond}, "every"},
		{Schedule{Cron: "61 * * * *"}, "cron"},
		{Schedule{Cron: "* * *"}, "cron"},
		{Schedule{Cron: "@daily"}, "cron"},
		{Schedule{Cron: "0 0 30 2 *"}, "cron"},
		{Schedule{Cron: "* * * * *", TimeZone: "Mars/Olympus"}, "timeZone"},
		{Schedule{Every: time.Minute, TimeZone: "Europe/Paris"}, "timeZone"},
		{Schedule{Every: time.Minute, Start: now, End: now.Add(-time.Hour)}, "end"},
		{Schedule{Cron: "0 0 2 1 *", End: now.Add(time.Hour)}, "end"},
		{Schedule{Every: time.Minute, Start: now.Add(-2 * time.Hour), End: now.Add(-time.Hour)}, "end"},
		{Schedule{Every: time.Minute, Jitter: -time.Second}, "jitter"},
		{Schedule{Every: time.Minute, Overlap: "later"}, "overlap"},
		{Schedule{Every: time.Minute, CatchUp: "maybe"}, "catchUp"},
	}
	for _, c := range cases {
		_, err := c.s.Next(now, 1)
		var se *ScheduleError
		if !errors.As(err, &se) || se.Field != c.field || !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: err %v, want a ScheduleError on %s", c.s, err, c.field)
		}
	}
}

// TestSchedulePolicies checks the run that follows a late or retried run,
// after an hour without runs, for each policy.
func TestSchedulePolicies(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	run := start.Add(10 * time.Minute)         // the run that was due
	now := run.Add(time.Hour + 30*time.Second) // when it ended: an hour later
	cases := []struct {
		name    string
		s       Schedule
		retried bool
		skip    bool // skipped without a call when first started at now
		want    time.Time
	}{
		{"catch-up once: this run, then the next future one", Schedule{CatchUp: CatchUpOnce}, false, false, start.Add(71 * time.Minute)},
		{"catch-up skip: not even this run", Schedule{CatchUp: CatchUpSkip}, false, true, start.Add(71 * time.Minute)},
		{"catch-up all: each missed run in turn", Schedule{CatchUp: CatchUpAll, CatchUpWindow: 2 * time.Hour}, false, false, start.Add(11 * time.Minute)},
		{"catch-up all: runs before the window are skipped", Schedule{CatchUp: CatchUpAll, CatchUpWindow: 30 * time.Minute}, false, true, start.Add(41 * time.Minute)},
		{"overlap skip: after retries, the next future run", Schedule{Overlap: OverlapSkip}, true, false, start.Add(71 * time.Minute)},
		{"overlap queue: after retries, the latest missed run at once", Schedule{Overlap: OverlapQueueOne}, true, false, start.Add(70 * time.Minute)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.s.Every, c.s.Start = time.Minute, start
			p, err := c.s.compile(start)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.skipLate(run, now); got != c.skip {
				t.Errorf("skipLate = %v, want %v", got, c.skip)
			}
			got, ok := p.following(run, now, c.retried)
			if !ok || !got.Equal(c.want) {
				t.Errorf("following = %v %v, want %v", got, ok, c.want)
			}
		})
	}
	// A cron schedule queues its latest missed run too.
	p, err := Schedule{Cron: "*/5 * * * *", Overlap: OverlapQueueOne}.compile(start)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := p.following(start, start.Add(time.Hour+2*time.Minute), true); !got.Equal(start.Add(time.Hour)) {
		t.Errorf("cron queue: following = %v, want %v", got, start.Add(time.Hour))
	}
}
