package timers

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedule says when a recurring timer runs: every Every (anchored at
// Start, so runs do not drift), or at the times a Cron expression names
// in TimeZone; never before Start nor after End.
type Schedule struct {
	// Every runs the timer at Start, Start+Every, Start+2·Every, …; at
	// least one second. Exactly one of Every and Cron is set.
	Every time.Duration
	// Cron is a cron expression of 5 fields (minute hour day-of-month
	// month day-of-week) or 6 with a leading seconds field, parsed by
	// github.com/robfig/cron/v3 (ranges, lists, steps, names such as MON
	// or JAN). Descriptors (@daily) and CRON_TZ= are not accepted: the
	// zone is TimeZone.
	Cron string
	// TimeZone is the IANA zone Cron's times are read in ("" is UTC).
	// Across a DST change a local time that does not exist that day runs
	// as if the clocks had not changed yet (02:30 is 03:30 when they go
	// from 02:00 to 03:00), and one that occurs twice runs once, at its
	// first occurrence.
	TimeZone string
	// Start is the first instant a run may be at; zero is the creation
	// time. End, when set, is the last.
	Start, End time.Time
	// Jitter delays each run by a random duration in [0, Jitter), to
	// spread many timers of the same schedule; a run is never earlier
	// than its scheduled time.
	Jitter time.Duration
	// Overlap is what happens to the runs that fall due while a run is
	// still being retried.
	Overlap OverlapPolicy
	// CatchUp is what happens to runs that fell due while nothing ran the
	// timer (every instance down, or the scheduler behind).
	CatchUp CatchUpPolicy
	// CatchUpWindow bounds CatchUpAll: missed runs scheduled longer than
	// this before now are skipped. 0 is one hour.
	CatchUpWindow time.Duration
}

// OverlapPolicy is a [Schedule]'s rule for runs that fall due while the
// previous run is still being retried. Runs of one timer never run at the
// same time: the next run is set when the previous one ends.
type OverlapPolicy string

const (
	// OverlapSkip (the default) skips them: after the retried run ends,
	// the next run is the first one scheduled after that moment.
	OverlapSkip OverlapPolicy = "skip"
	// OverlapQueueOne runs one of them, at once, after the retried run
	// ends (the latest that fell due); the others are skipped.
	OverlapQueueOne OverlapPolicy = "queue"
)

// CatchUpPolicy is a [Schedule]'s rule for runs missed while the timer
// could not run. A run is missed when the run after it is due before it
// started.
type CatchUpPolicy string

const (
	// CatchUpOnce (the default) runs the first missed run, late, and skips
	// the rest.
	CatchUpOnce CatchUpPolicy = "once"
	// CatchUpSkip skips every missed run: the next run is the first one
	// scheduled after now.
	CatchUpSkip CatchUpPolicy = "skip"
	// CatchUpAll runs each missed run scheduled within CatchUpWindow
	// before now, one after the other, oldest first.
	CatchUpAll CatchUpPolicy = "all"
)

// Schedule limits.
const (
	// MinEvery is the shortest interval of a recurring timer.
	MinEvery = time.Second
	// MaxJitter is the largest jitter.
	MaxJitter = time.Hour
	// defaultCatchUpWindow is CatchUpWindow's default.
	defaultCatchUpWindow = time.Hour
)

// ScheduleError is a [Schedule] that cannot be used: Field names the
// offending field as the admin API spells it (every, cron, timeZone,
// start, end, jitter, overlap, catchUp, catchUpWindow). It wraps
// ErrInvalid.
type ScheduleError struct {
	Field  string
	Reason string
}

func (e *ScheduleError) Error() string { return "schedule " + e.Field + ": " + e.Reason }

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *ScheduleError) Unwrap() error { return ErrInvalid }

// bad is a plan refused with a *ScheduleError on field.
func bad(field, format string, a ...any) (plan, error) {
	return plan{}, &ScheduleError{Field: field, Reason: fmt.Sprintf(format, a...)}
}

// cronParser reads 5 fields, or 6 with seconds first.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// plan is a checked schedule, ready to compute run times.
type plan struct {
	s    Schedule
	loc  *time.Location
	spec cron.Schedule // nil for an interval
}

// compile checks s and fills its defaults. now is used when Start is zero.
func (s Schedule) compile(now time.Time) (plan, error) {
	s = s.filled(now)
	p, err := s.plan()
	if err != nil {
		return plan{}, err
	}
	if _, ok := p.after(now.Add(-time.Nanosecond)); !ok {
		field := "cron"
		if !s.End.IsZero() || s.Cron == "" {
			field = "end"
		}
		return bad(field, "the schedule has no run after %s", now.UTC().Format(time.RFC3339))
	}
	return p, nil
}

// filled is s with its defaults: now is the start when it has none.
func (s Schedule) filled(now time.Time) Schedule {
	if s.Overlap == "" {
		s.Overlap = OverlapSkip
	}
	if s.CatchUp == "" {
		s.CatchUp = CatchUpOnce
	}
	if s.CatchUpWindow == 0 {
		s.CatchUpWindow = defaultCatchUpWindow
	}
	if s.Start.IsZero() {
		s.Start = now
	}
	s.Start, s.End = s.Start.UTC(), s.End.UTC()
	return s
}

// plan checks a schedule whose defaults are filled in and readies it.
func (s Schedule) plan() (plan, error) {
	p := plan{loc: time.UTC}
	switch {
	case (s.Every == 0) == (s.Cron == ""):
		return bad("every", "set exactly one of every and cron")
	case s.Cron == "" && s.Every < MinEvery:
		return bad("every", "%v is under the minimum of %v", s.Every, MinEvery)
	case s.Cron == "" && s.TimeZone != "":
		return bad("timeZone", "a time zone applies to a cron schedule only")
	case s.Jitter < 0 || s.Jitter > MaxJitter:
		return bad("jitter", "%v is outside 0 to %v", s.Jitter, MaxJitter)
	case s.Overlap != OverlapSkip && s.Overlap != OverlapQueueOne:
		return bad("overlap", "%q is not skip or queue", s.Overlap)
	case s.CatchUp != CatchUpOnce && s.CatchUp != CatchUpSkip && s.CatchUp != CatchUpAll:
		return bad("catchUp", "%q is not once, skip or all", s.CatchUp)
	case s.CatchUpWindow < 0:
		return bad("catchUpWindow", "%v is negative", s.CatchUpWindow)
	case !s.End.IsZero() && !s.End.After(s.Start):
		return bad("end", "%s is not after the start %s", s.End.Format(time.RFC3339), s.Start.Format(time.RFC3339))
	}
	if s.Cron != "" {
		if strings.HasPrefix(strings.TrimSpace(s.Cron), "@") || strings.Contains(s.Cron, "TZ=") {
			return bad("cron", "%q: descriptors and CRON_TZ are not accepted; use fields and timeZone", s.Cron)
		}
		if s.TimeZone != "" {
			loc, err := time.LoadLocation(s.TimeZone)
			if err != nil || s.TimeZone == "Local" {
				return bad("timeZone", "%q is not a known IANA time zone", s.TimeZone)
			}
			p.loc = loc
		}
		spec, err := cronParser.Parse(s.Cron)
		if err != nil {
			return bad("cron", "%q: %v", s.Cron, err)
		}
		ss, ok := spec.(*cron.SpecSchedule)
		if !ok {
			return bad("cron", "%q is not a field schedule", s.Cron)
		}
		ss.Location = time.UTC
		p.spec = ss
	}
	p.s = s
	return p, nil
}

// after is the first run time strictly after t, within Start and End.
func (p plan) after(t time.Time) (time.Time, bool) {
	var next time.Time
	if p.spec == nil {
		next = p.s.Start
		if !t.Before(next) {
			k := t.Sub(p.s.Start)/p.s.Every + 1
			next = p.s.Start.Add(k * p.s.Every)
		}
	} else {
		from := t
		if lo := p.s.Start.Add(-time.Nanosecond); from.Before(lo) {
			from = lo
		}
		var ok bool
		if next, ok = p.cronAfter(from); !ok {
			return time.Time{}, false
		}
	}
	if !p.s.End.IsZero() && next.After(p.s.End) {
		return time.Time{}, false
	}
	return next.UTC(), true
}

// cronAfter is the first time of the cron expression strictly after t.
// The expression is matched against wall-clock times of the zone (cron
// runs in UTC, which has no DST), each mapped back to the zone: a wall time
// in a DST gap maps as if the clocks had not changed yet (02:30 becomes
// 03:30 when they go from 02:00 to 03:00), and one that occurs twice maps
// to its first occurrence only, so it runs once.
func (p plan) cronAfter(t time.Time) (time.Time, bool) {
	l := t.In(p.loc)
	w := time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
	for range 10_000 {
		w = p.spec.Next(w)
		if w.IsZero() {
			return time.Time{}, false
		}
		abs := firstOccurrence(w, p.loc)
		if abs.After(t) && !abs.Before(p.s.Start) {
			return abs, true
		}
	}
	return time.Time{}, false
}

// firstOccurrence is the first instant whose wall clock in loc reads w's
// fields (time.Date may pick the second of two).
func firstOccurrence(w time.Time, loc *time.Location) time.Time {
	abs := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), 0, loc)
	_, offNow := abs.Zone()
	_, offBefore := abs.Add(-6 * time.Hour).Zone()
	if offBefore > offNow {
		c := w.Add(-time.Duration(offBefore) * time.Second).In(loc)
		if c.Before(abs) && c.Hour() == w.Hour() && c.Minute() == w.Minute() && c.Day() == w.Day() {
			return c
		}
	}
	return abs
}

// latestBy is the last run time in [from, t], from being a run time not
// after t. Cron schedules cannot step backwards, so it walks forward from
// the latest of a few look-back spans that holds a run, a bounded number
// of steps.
func (p plan) latestBy(from, t time.Time) time.Time {
	if p.spec == nil {
		return p.s.Start.Add(t.Sub(p.s.Start) / p.s.Every * p.s.Every)
	}
	for _, span := range []time.Duration{time.Minute, time.Hour, 24 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour} {
		lo := t.Add(-span)
		if lo.Before(from) {
			lo = from.Add(-time.Nanosecond)
		}
		n, ok := p.after(lo)
		if !ok || n.After(t) {
			continue
		}
		for steps := 0; steps < 100_000; steps++ {
			m, ok := p.after(n)
			if !ok || m.After(t) {
				return n
			}
			n = m
		}
		return n
	}
	return from
}

// Next returns the first n run times of s after t (fewer when it ends),
// or a *ScheduleError when s cannot be used.
func (s Schedule) Next(t time.Time, n int) ([]time.Time, error) {
	p, err := s.compile(t)
	if err != nil {
		return nil, err
	}
	return p.next(t, n), nil
}

func (p plan) next(t time.Time, n int) []time.Time {
	var out []time.Time
	for len(out) < n {
		r, ok := p.after(t)
		if !ok {
			break
		}
		out = append(out, r)
		t = r
	}
	return out
}

// skipLate reports whether a run scheduled at run, first started at now,
// is skipped without a call: the catch-up policy drops it.
func (p plan) skipLate(run, now time.Time) bool {
	switch p.s.CatchUp {
	case CatchUpSkip:
		n, ok := p.after(run)
		return ok && !n.After(now)
	case CatchUpAll:
		return run.Before(now.Add(-p.s.CatchUpWindow))
	}
	return false
}

// following is the run after the run scheduled at run, which ended at now
// after one attempt or (retried) more; ok is false when the schedule has
// no more runs.
func (p plan) following(run, now time.Time, retried bool) (time.Time, bool) {
	n, ok := p.after(run)
	if !ok || n.After(now) {
		return n, ok
	}
	// Runs fell due while this one was late or retried.
	switch {
	case retried && p.s.Overlap == OverlapQueueOne:
		return p.latestBy(n, now), true
	case !retried && p.s.CatchUp == CatchUpAll:
		if lo := now.Add(-p.s.CatchUpWindow); n.Before(lo) {
			return p.after(lo.Add(-time.Nanosecond))
		}
		return n, true
	}
	return p.after(now)
}

// errNoSchedule is returned for a recurring operation on a one-shot timer.
var errNoSchedule = errors.New("not a recurring timer")
