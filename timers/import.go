package timers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
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
// stores each: an active timer or a recurring one under its name
// (replacing one of that name) with its due time kept (one in the past is
// due at once) and a new generation, with no attempts; a dead letter as it
// was. A line that does not parse or describes no valid timer is refused
// with its line number and the reason, and the rest is imported. Active
// timers count toward MaxActive: past it, lines are refused with the
// limit (the earlier lines win). With dryRun nothing is stored; the report
// says what would be, the limit counted from the names the store does not
// hold yet. The error is for what stops the whole import: reading r, or
// ctx.
//
// Lines are written importBatch at a time, those of different names at
// once and those of one name in their order, so that an import costs
// about one round trip to the store per batch rather than per line; near
// the limit a batch is written one line after the other, so that the
// earlier lines still win.
func (s *Scheduler) Import(ctx context.Context, r io.Reader, dryRun bool) (ImportReport, error) {
	return s.importFrom(ctx, r, dryRun, nil)
}

// importBatch is how many lines an import applies at once.
const importBatch = 64

// importFrom is Import, calling progress (when not nil) with the report so
// far after each batch.
func (s *Scheduler) importFrom(ctx context.Context, r io.Reader, dryRun bool, progress func(ImportReport)) (ImportReport, error) {
	rep := ImportReport{DryRun: dryRun}
	im := &importer{s: s, rep: &rep, bound: -1}
	if dryRun {
		dry, err := s.newDryRun(ctx)
		if err != nil {
			return rep, fmt.Errorf("import: %w", err)
		}
		im.dry = dry
	}
	var batch []importLine
	flush := func() error {
		if err := im.apply(ctx, batch); err != nil {
			return err
		}
		batch = batch[:0]
		if progress != nil {
			progress(rep)
		}
		return nil
	}
	refuse := func(n int, name, reason string) {
		batch = append(batch, importLine{n: n, name: name, refusal: reason})
	}
	err := readLines(r, &rep.Lines, refuse, func(n int, rec ExportRecord) error {
		batch = append(batch, importLine{n: n, name: rec.Name, rec: &rec})
		if len(batch) < importBatch {
			return nil
		}
		return flush()
	})
	if err == nil && len(batch) > 0 {
		err = flush()
	}
	if err != nil {
		return rep, fmt.Errorf("import: %w", err)
	}
	return rep, nil
}

// importLine is a line read: a record to apply, or a refusal already.
type importLine struct {
	n       int
	name    string
	rec     *ExportRecord
	refusal string
}

// importer applies an import's lines a batch at a time.
type importer struct {
	s   *Scheduler
	rep *ImportReport
	dry *dryRun // nil for a real import
	// bound is at least the store's active timers: read from the store
	// when a batch might cross the limit, else counted up by the timers
	// stored since (-1: not read yet).
	bound int
}

// apply applies a batch, then reports its lines in order.
func (im *importer) apply(ctx context.Context, batch []importLine) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	errs := make([]error, len(batch))
	switch {
	case im.dry != nil:
		im.dry.checkAll(ctx, batch, errs)
	case im.roomFor(ctx, len(batch)):
		byName(batch, func(i int) { errs[i] = im.s.importOne(ctx, *batch[i].rec) })
	default:
		for i := range batch {
			if batch[i].rec != nil {
				errs[i] = im.s.importOne(ctx, *batch[i].rec)
			}
		}
		im.bound = -1
	}
	if err := ctx.Err(); err != nil {
		return err // the batch's errors may be the cancellation's
	}
	for i, l := range batch {
		switch {
		case l.rec == nil:
			im.refuse(l.n, l.name, l.refusal)
		case errs[i] != nil:
			im.refuse(l.n, l.name, errs[i].Error())
		default:
			im.rep.Imported++
			if l.rec.Kind != KindDead && im.bound >= 0 {
				im.bound++
			}
		}
	}
	return nil
}

// roomFor reports whether n more active timers fit under the limit
// whatever the batch holds, so that its lines can be written at once
// without a later line taking the place of an earlier one. A store that
// cannot say counts as no room: the lines go one by one.
func (im *importer) roomFor(ctx context.Context, n int) bool {
	max := im.s.cfg.MaxActive
	if im.bound < 0 || im.bound+n > max {
		st, err := im.s.store.stats(ctx)
		if err != nil {
			im.bound = -1
			return false
		}
		im.bound = st.active
	}
	return im.bound+n <= max
}

func (im *importer) refuse(n int, name, reason string) {
	im.rep.RefusedCount++
	if len(im.rep.Refused) < maxRefusals {
		im.rep.Refused = append(im.rep.Refused, ImportRefusal{Line: n, Name: name, Reason: reason})
	}
}

// byName calls apply for each line of the batch that holds a record: the
// lines of one name one after the other in their order, those of
// different names at once.
func byName(batch []importLine, apply func(i int)) {
	groups := map[string][]int{}
	var names []string
	for i, l := range batch {
		if l.rec == nil {
			continue
		}
		if _, ok := groups[l.name]; !ok {
			names = append(names, l.name)
		}
		groups[l.name] = append(groups[l.name], i)
	}
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Go(func() {
			for _, i := range groups[name] {
				apply(i)
			}
		})
	}
	wg.Wait()
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

// checkAll checks a batch's records: the store is read for all of them
// at once, and the limit counted in their order.
func (d *dryRun) checkAll(ctx context.Context, batch []importLine, errs []error) {
	held := make([]bool, len(batch))
	byName(batch, func(i int) {
		r := *batch[i].rec
		if err := d.s.validate(r); err != nil || r.Kind == KindDead {
			errs[i] = err
			return
		}
		_, err := d.s.store.get(ctx, r.Name)
		if err != nil && !errors.Is(err, ErrNotFound) {
			errs[i] = err
			return
		}
		held[i] = err == nil
	})
	for i, l := range batch {
		if l.rec == nil || errs[i] != nil || l.rec.Kind == KindDead {
			continue
		}
		errs[i] = d.count(l.name, held[i])
	}
}

// count counts a timer of that name toward the limit, unless the store
// holds one (held) or an earlier line made one: it replaces it.
func (d *dryRun) count(name string, held bool) error {
	if held || d.seen[name] {
		return nil
	}
	if d.active >= d.s.cfg.MaxActive {
		return &LimitError{Limit: LimitActive, Value: d.active, Max: d.s.cfg.MaxActive}
	}
	d.seen[name] = true
	d.active++
	return nil
}
