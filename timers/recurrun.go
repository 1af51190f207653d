package timers

import "time"

// storeTime is now in the store's time, for a call of job j: the claim's
// store time plus the local time since.
func (l *loop) storeTime(j job) time.Time { return j.storeNow.Add(l.s.clk.Since(j.claimedAt)) }

// skipLate is the result of a recurring timer's first attempt at a run
// that its catch-up policy drops (ok true): the run is not called, and
// the timer moves on.
func (l *loop) skipLate(j job) (result, bool) {
	rc := j.t.Recurring
	if rc == nil || j.t.Attempts != 1 {
		return result{}, false
	}
	p, err := rc.Schedule.plan()
	at := l.storeTime(j)
	if err != nil || !p.skipLate(rc.Run, at) {
		return result{}, false
	}
	l.s.metrics.fired.WithLabelValues(resultSkipped).Inc()
	l.s.log.Debug("recurring timer run skipped by its catch-up policy", "timer", j.t.Name,
		"run", rc.Run, "catchUp", rc.Schedule.CatchUp)
	return result{t: j.t, firing: firingOf(j.t), skipped: true, at: at}, true
}

// advanceOf moves a recurring timer on after run r: to the run its
// schedule and policies give, leaving a dead letter when r gave up.
func (l *loop) advanceOf(r result, giveUp bool) advanceRequest {
	rc := r.t.Recurring
	a := advanceRequest{firing: r.firing, checkAttempt: r.skipped || giveUp}
	if giveUp {
		a.dead, a.err = deadRunName(r.t.Name, rc.Run), r.err.Error()
	}
	p, err := rc.Schedule.plan()
	if err != nil {
		l.s.log.Error("recurring timer has a schedule that no longer reads; it ends", "timer", r.t.Name, "err", err)
		return a
	}
	if run, ok := p.following(rc.Run, r.at, r.firing.Attempt > 1); ok {
		next := *rc
		next.Run = run
		a.next, a.due = &next, jittered(run, rc.Schedule.Jitter)
	}
	return a
}

// noteAdvanced logs and counts the runs that gave up, and wakes the loop
// for the earliest next run.
func (l *loop) noteAdvanced(as []advanceRequest, outcomes []advanceOutcome) {
	for i, a := range as {
		if outcomes[i] == advanceStale {
			continue
		}
		if a.dead != "" {
			l.s.metrics.givenUp.Inc()
			l.s.log.Error("recurring timer run gave up after its last retry; kept as a dead letter, the schedule goes on",
				"timer", a.firing.Name, "deadLetter", a.dead, "attempts", a.firing.Attempt, "err", a.err)
		}
		if a.next != nil {
			l.noteDue(a.due)
		}
	}
}
