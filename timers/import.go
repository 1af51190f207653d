package timers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// MaxImportLine is the longest line Import reads, in bytes; a longer one
// is refused.
const MaxImportLine = 64 << 10

// maxRefusals bounds the refusals an ImportReport lists (it counts all).
const maxRefusals = 1000

// ImportReport is what [Scheduler.Import] did, or would do in a dry run.
type ImportReport struct {
	DryRun bool
	// Lines is the number of lines read, blank ones included.
	Lines int
	// Imported is the number of timers stored (in a dry run: that would
	// be, as far as the limit can tell before they are).
	Imported int
	// RefusedCount is the number of lines refused; Refused lists the
	// first 1,000 of them by line number.
	RefusedCount int
	Refused      []ImportRefusal
}

// ImportRefusal is a line Import did not take, and why.
type ImportRefusal struct {
	Line   int
	Name   string
	Reason string
}

// Import reads lines of [ExportRecord] JSON (what Export writes) and
// stores each, in order: an active timer or a recurring one under its name
// (replacing one of that name) with its due time kept (one in the past is
// due at once) and a new generation, with no attempts; a dead letter as it
// was. A line that does not parse or describes no valid timer is refused
// with its line number and the reason, and the rest is imported. Active
// timers count toward MaxActive: past it, lines are refused with the
// limit (the earlier lines win). With dryRun nothing is stored; the report says what would be,
// the limit counted from the names the store does not hold yet. The
// error is for what stops the whole import: reading r, or ctx.
func (s *Scheduler) Import(ctx context.Context, r io.Reader, dryRun bool) (ImportReport, error) {
	rep := ImportReport{DryRun: dryRun}
	apply := s.importOne
	if dryRun {
		dry, err := s.newDryRun(ctx)
		if err != nil {
			return rep, fmt.Errorf("import: %w", err)
		}
		apply = dry.check
	}
	refuse := func(n int, name, reason string) {
		rep.RefusedCount++
		if len(rep.Refused) < maxRefusals {
			rep.Refused = append(rep.Refused, ImportRefusal{Line: n, Name: name, Reason: reason})
		}
	}
	err := readLines(r, &rep.Lines, refuse, func(n int, rec ExportRecord) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := apply(ctx, rec); err != nil {
			refuse(n, rec.Name, err.Error())
			return nil
		}
		rep.Imported++
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("import: %w", err)
	}
	return rep, nil
}

// readLines hands the lines of r that parse to use, in order, counting
// them in *count, and refuses those that do not; an error of use stops it.
func readLines(r io.Reader, count *int, refuse func(int, string, string), use func(int, ExportRecord) error) error {
	br := bufio.NewReaderSize(r, MaxImportLine)
	for n := 1; ; n++ {
		line, tooLong, err := readLine(br)
		if len(line) > 0 || tooLong || err == nil {
			*count = n
		}
		switch {
		case tooLong:
			refuse(n, "", fmt.Sprintf("line longer than %d bytes", MaxImportLine))
		case len(bytes.TrimSpace(line)) == 0:
		default:
			var rec ExportRecord
			if perr := json.Unmarshal(line, &rec); perr != nil {
				refuse(n, "", "does not parse: "+perr.Error())
			} else if uerr := use(n, rec); uerr != nil {
				return uerr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read line %d: %w", n, err)
		}
	}
}

// readLine reads one line without its newline; a line longer than the
// reader's buffer is skipped (tooLong).
func readLine(br *bufio.Reader) (line []byte, tooLong bool, err error) {
	line, err = br.ReadSlice('\n')
	for errors.Is(err, bufio.ErrBufferFull) {
		tooLong = true
		_, err = br.ReadSlice('\n')
	}
	if tooLong {
		return nil, true, err
	}
	return bytes.TrimRight(line, "\r\n"), false, err
}

// validate checks what a record must hold for its kind.
func (s *Scheduler) validate(r ExportRecord) error {
	if err := s.check(r.Name, 0, r.call(), createOptions{maxRetries: r.MaxRetries}); err != nil {
		return err
	}
	switch r.Kind {
	case KindTimer:
		if r.DueAt.IsZero() {
			return errors.New("dueAt is missing")
		}
	case KindRecurring:
		if r.Schedule == nil || r.Run.IsZero() {
			return errors.New("a recurring timer needs schedule and run")
		}
		if _, err := r.Schedule.filled(r.Run).plan(); err != nil {
			return err
		}
	case KindDead:
		if r.DiedAt.IsZero() {
			return errors.New("diedAt is missing")
		}
	default:
		return fmt.Errorf("kind %q is not timer, recurring or dead", r.Kind)
	}
	return nil
}

// importOne stores one record.
func (s *Scheduler) importOne(ctx context.Context, r ExportRecord) error {
	if err := s.validate(r); err != nil {
		return err
	}
	var err error
	switch r.Kind {
	case KindTimer:
		_, err = s.store.create(ctx, createRequest{
			name: r.Name, at: r.DueAt, call: r.call(), maxRetries: r.MaxRetries, maxActive: s.cfg.MaxActive,
		})
		if err == nil {
			s.noteCreated(r.DueAt)
		}
	case KindRecurring:
		rc := &Recurrence{Schedule: r.Schedule.filled(r.Run), Run: r.Run.UTC(), Paused: r.Paused}
		due := r.DueAt
		if due.Before(rc.Run) {
			due = time.Time{}
		}
		_, err = s.putRecurringAt(ctx, r.Name, r.call(), r.MaxRetries, rc, due, 0, "")
	case KindDead:
		for _, at := range []*time.Time{&r.DueAt, &r.CreatedAt} {
			if at.IsZero() {
				*at = r.DiedAt
			}
		}
		t := Timer{Name: r.Name, Call: r.call(), DueAt: r.DueAt, CreatedAt: r.CreatedAt, MaxRetries: r.MaxRetries,
			Attempts: r.Attempts, LastError: truncateError(r.LastError), LastAttemptAt: r.LastAttemptAt}
		err = s.store.putDead(ctx, DeadLetter{Timer: t, DiedAt: r.DiedAt})
	}
	return err
}

// dryRun checks lines against the store without writing: the active
// limit is counted from the store's count and the names it does not hold.
type dryRun struct {
	s      *Scheduler
	active int
	seen   map[string]bool
}

func (s *Scheduler) newDryRun(ctx context.Context) (*dryRun, error) {
	st, err := s.store.stats(ctx)
	if err != nil {
		return nil, err
	}
	return &dryRun{s: s, active: st.active, seen: map[string]bool{}}, nil
}

func (d *dryRun) check(ctx context.Context, r ExportRecord) error {
	if err := d.s.validate(r); err != nil || r.Kind == KindDead {
		return err
	}
	_, err := d.s.store.get(ctx, r.Name)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	if err == nil || d.seen[r.Name] {
		return nil // replaces a timer: no more of them
	}
	if d.active >= d.s.cfg.MaxActive {
		return &LimitError{Limit: LimitActive, Value: d.active, Max: d.s.cfg.MaxActive}
	}
	d.seen[r.Name] = true
	d.active++
	return nil
}
