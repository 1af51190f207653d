package durablecalls

// Drain's last stage (see package drain): the controller stores every
// confirmation it knows of, at once (a retry's backoff is cut short), and
// says so once they are all stored.

// The stage reaches the controller as a Msg (registered in Start), which
// it hands to Handle like every other.

// flush stores every wanted confirmation now, and calls done once all are
// stored (at once if they are).
func (d *Calls[A, T]) flush(done func()) {
	d.flushes = append(d.flushes, done)
	if d.confirm.cancel == nil && !(d.batch != nil && d.sent.n > 0) {
		d.timers.Cancel(durableTimerKey{op: opStoreConfirmed, retry: true})
		d.issueStoreConfirmed()
	}
	d.checkFlushed()
}

// checkFlushed calls the flushes waiting once every wanted confirmation is
// stored.
func (d *Calls[A, T]) checkFlushed() {
	if len(d.flushes) == 0 {
		return
	}
	for _, c := range d.confirms {
		if c.wanted > c.stored {
			return
		}
	}
	for _, done := range d.flushes {
		done()
	}
	d.flushes = nil
}

// LeaveDrain leaves Drain's stage: the controller failed or stops. A
// flush waiting is let go: nothing more will be stored.
func (d *Calls[A, T]) LeaveDrain() {
	if d.undrain != nil {
		d.undrain()
	}
	for _, done := range d.flushes {
		done()
	}
	d.flushes = nil
}
