package timers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
)

// ImportJob is an import that runs after its request was answered: what it
// has done so far while it runs, and its whole report once it ended. It
// is kept in the store for ImportJobRetention after it was last updated,
// so that any instance can show it, and it outlives the instance that ran
// it.
type ImportJob struct {
	ID string `json:"id"`
	// State is ImportRunning, ImportDone, ImportFailed (the import
	// stopped on an error: Error says which; the lines before it were
	// imported) or ImportInterrupted (its instance shut down; the lines
	// before were imported).
	State     ImportState `json:"state"`
	StartedAt time.Time   `json:"startedAt"`
	UpdatedAt time.Time   `json:"updatedAt"`
	// Report is the report so far while the job runs, the whole report
	// once it ended.
	Report ImportReport `json:"report"`
	Error  string       `json:"error,omitempty"`
}

// ImportState is where an import job is.
type ImportState string

// The states of an import job.
const (
	ImportRunning     ImportState = "running"
	ImportDone        ImportState = "done"
	ImportFailed      ImportState = "failed"
	ImportInterrupted ImportState = "interrupted"
)

// ImportJobRetention is how long an import job is kept after its last
// update.
const ImportJobRetention = 24 * time.Hour

// importJobEvery is how many lines a running job reads between two
// updates of its record.
const importJobEvery = 5 * importBatch

// importJobs are the import jobs this scheduler runs.
type importJobs struct {
	mu      sync.Mutex
	cancels map[string]context.CancelFunc
	wg      sync.WaitGroup
}

// StartImport imports body (JSON lines, as Import reads them) in the
// background and returns its job, stored as running. The job runs until
// it ends or Shutdown stops it (then it is interrupted), and keeps its
// record up to date meanwhile; read it with ImportJob. It fails if the
// job's record cannot be stored.
func (s *Scheduler) StartImport(ctx context.Context, body []byte, dryRun bool) (ImportJob, error) {
	now := s.clk.Now().UTC()
	job := ImportJob{ID: uuid.NewString(), State: ImportRunning, StartedAt: now, UpdatedAt: now,
		Report: ImportReport{DryRun: dryRun, Refused: []ImportRefusal{}}}
	if err := s.store.putImportJob(ctx, job, ImportJobRetention); err != nil {
		return ImportJob{}, fmt.Errorf("start import: store the job: %w", err)
	}
	jobCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	j := &s.imports
	j.mu.Lock()
	if j.cancels == nil {
		j.cancels = map[string]context.CancelFunc{}
	}
	j.cancels[job.ID] = cancel
	j.wg.Add(1)
	j.mu.Unlock()
	go func() {
		defer j.wg.Done()
		defer func() {
			j.mu.Lock()
			delete(j.cancels, job.ID)
			j.mu.Unlock()
			cancel()
		}()
		s.runImport(jobCtx, job, body)
	}()
	return job, nil
}

// runImport runs a job and records how it went.
func (s *Scheduler) runImport(ctx context.Context, job ImportJob, body []byte) {
	save := func() {
		job.UpdatedAt = s.clk.Now().UTC()
		// Saved even when ctx ended: the job's last record says so.
		if err := s.store.putImportJob(context.WithoutCancel(ctx), job, ImportJobRetention); err != nil {
			s.log.Warn("timers: import job: could not store its progress", "job", job.ID, "err", err.Error())
		}
	}
	lastSaved := 0
	rep, err := s.importFrom(ctx, bytes.NewReader(body), job.Report.DryRun, func(r ImportReport) {
		if r.Lines-lastSaved >= importJobEvery {
			job.Report, lastSaved = r, r.Lines
			save()
		}
	})
	job.Report = rep
	switch {
	case err == nil:
		job.State = ImportDone
	case errors.Is(err, context.Canceled):
		job.State, job.Error = ImportInterrupted, "the instance running the import shut down; "+
			"the lines read were imported, and importing the file again is safe"
	default:
		job.State, job.Error = ImportFailed, err.Error()
	}
	save()
	s.log.Info("timers: import job ended", "job", job.ID, "state", string(job.State),
		"lines", rep.Lines, "imported", rep.Imported, "refused", rep.RefusedCount)
}

// ImportJob returns the import job of that id, or an error wrapping
// ErrNotFound (none, or ended more than ImportJobRetention ago).
func (s *Scheduler) ImportJob(ctx context.Context, id string) (ImportJob, error) {
	job, err := s.store.getImportJob(ctx, id)
	if err != nil {
		return ImportJob{}, fmt.Errorf("import job %q: %w", id, err)
	}
	return job, nil
}

// stopImports stops the import jobs this scheduler runs, each recorded
// as interrupted with what it had done, and waits for them (bounded by
// ctx; Shutdown goes on with the rest either way).
func (s *Scheduler) stopImports(ctx context.Context) error {
	j := &s.imports
	j.mu.Lock()
	running := len(j.cancels)
	for _, cancel := range j.cancels {
		cancel()
	}
	j.mu.Unlock()
	if running == 0 {
		return nil
	}
	done := make(chan struct{})
	go func() { j.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("timers: import jobs still stopping: %w", ctx.Err())
	}
}
