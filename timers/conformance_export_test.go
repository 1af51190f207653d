package timers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/components"
)

var flagMoveTimers = flag.Int("timers.move", 2000, "how many timers TestExportImportIntoCluster moves (50000 for the full size)")

func TestConformanceExport(t *testing.T) { runConformance(t, exportCases()) }

// exportAll is the JSON lines Export writes.
func exportAll(t *testing.T, s *Scheduler) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if err := s.Export(t.Context(), func(r ExportRecord) error { return enc.Encode(r) }); err != nil {
		t.Fatalf("Export: %v", err)
	}
	return buf.Bytes()
}

func exportCases() []conformanceCase {
	return []conformanceCase{
		{
			name:     "ExportImportRoundTrip",
			property: "Export writes every timer (single, recurring, paused, dead) as JSON lines; Import into an empty store keeps names, calls, due times, schedules and dead letters, with fresh generations and no attempts",
			run: func(t *testing.T, e *env) {
				s := e.start(t)
				e.rec.handle = func(_ context.Context, c components.DeferredCall) error {
					if c.EntityID == "" && string(c.Argument) == `"fails"` {
						return components.Errorf("no")
					}
					return nil
				}
				failing := mustCreate(t, s, "failing", time.Second, testCall(`"fails"`), WithMaxRetries(5))
				mustCreate(t, s, "later", time.Hour, testCall(`{"id":2}`), WithMaxRetries(3))
				mustRecur(t, s, "every", Schedule{Every: time.Minute, CatchUp: CatchUpAll})
				mustRecur(t, s, "nightly", Schedule{Cron: "0 2 * * *", TimeZone: "Europe/Paris"})
				if _, err := s.Pause(t.Context(), "nightly"); err != nil {
					t.Fatal(err)
				}
				advanceTo(t, e.clk, s, failing.DueAt)
				killTimer(t, e, s, "dead", testCall(`"fails"`))
				lines := exportAll(t, s)
				if n := bytes.Count(lines, []byte("\n")); n != 5 {
					t.Fatalf("export has %d lines, want 5:\n%s", n, lines)
				}

				target := newScheduler(t, newStore(t, e.kind, e.clk), e.rec, e.cfg)
				rep, err := target.Import(t.Context(), bytes.NewReader(lines), false)
				if err != nil || rep.Imported != 5 || rep.RefusedCount != 0 || rep.Lines != 5 {
					t.Fatalf("Import = %+v, %v", rep, err)
				}
				for _, name := range []string{"failing", "later", "every", "nightly"} {
					was, _ := s.Get(t.Context(), name)
					got, err := target.Get(t.Context(), name)
					if err != nil {
						t.Fatalf("Get(%q) after import: %v", name, err)
					}
					if !got.DueAt.Equal(was.DueAt) || got.Attempts != 0 || got.LastError != "" || got.MaxRetries != was.MaxRetries ||
						string(got.Call.Argument) != string(was.Call.Argument) || (got.Recurring == nil) != (was.Recurring == nil) {
						t.Errorf("%s imported as %+v, was %+v", name, got, was)
					}
					if was.Recurring != nil && (!got.Recurring.Run.Equal(was.Recurring.Run) || got.Recurring.Paused != was.Recurring.Paused ||
						got.Recurring.Schedule.Cron != was.Recurring.Schedule.Cron || got.Recurring.Schedule.CatchUp != was.Recurring.Schedule.CatchUp) {
						t.Errorf("%s: recurrence imported as %+v, was %+v", name, got.Recurring, was.Recurring)
					}
				}
				was, _ := s.GetDeadLetter(t.Context(), "dead")
				got, err := target.GetDeadLetter(t.Context(), "dead")
				if err != nil || !got.DiedAt.Equal(was.DiedAt) || got.Attempts != was.Attempts || got.LastError != was.LastError ||
					string(got.Call.Argument) != string(was.Call.Argument) {
					t.Errorf("dead letter imported as %+v, %v; was %+v", got, err, was)
				}
			},
		},
		{
			name:     "ImportRefusesBadLinesAndKeepsTheRest",
			property: "a line that does not parse or holds no valid timer is refused with its line number and reason; the others are imported; past MaxActive lines are refused with the limit; a dry run stores nothing",
			cfg:      Config{MaxActive: 2},
			run: func(t *testing.T, e *env) {
				s := e.scheduler(t)
				due := epoch.Add(time.Hour).Format(time.RFC3339)
				line := func(name, extra string) string {
					return `{"kind":"timer","name":"` + name + `","componentId":"test-action","method":"run","payload":1,"dueAt":"` + due + `"` + extra + `}`
				}
				input := strings.Join([]string{
					line("a", ""),
					`{"kind":"timer",`, // 2: does not parse
					"",
					line("b", `,"kind":"other"`), // 4: unknown kind
					`{"kind":"recurring","name":"c","componentId":"test-action","method":"run","run":"` + due + `","schedule":{"cron":"61 * * * *"}}`, // 5
					line("d", ""),
					line("e", ""), // 7: over the limit of 2
					line("a", ""), // 8: replaces a, within the limit
				}, "\n")
				for _, dry := range []bool{true, false} {
					rep, err := s.Import(t.Context(), strings.NewReader(input), dry)
					if err != nil {
						t.Fatal(err)
					}
					var lines []int
					for _, r := range rep.Refused {
						lines = append(lines, r.Line)
					}
					if rep.Imported != 3 || rep.RefusedCount != 4 || rep.Lines != 8 || !equalInts(lines, []int{2, 4, 5, 7}) {
						t.Fatalf("dry %v: report %+v, want 3 imported and lines 2, 4, 5, 7 refused", dry, rep)
					}
					if !strings.Contains(rep.Refused[2].Reason, "cron") || !strings.Contains(rep.Refused[3].Reason, "active") {
						t.Errorf("reasons %+v: want the cron and the limit named", rep.Refused)
					}
					st, _ := s.Stats(t.Context())
					if want := map[bool]int{true: 0, false: 2}[dry]; st.Active != want {
						t.Errorf("dry %v: %d active after the import, want %d", dry, st.Active, want)
					}
				}
				if _, err := s.Get(t.Context(), "e"); !errors.Is(err, ErrNotFound) {
					t.Errorf("e was over the limit, yet: %v", err)
				}
			},
		},
		{
			name: "ImportInBatchesKeepsTheOrder",
			property: "an import longer than a batch keeps the lines of one name in order (the last line wins) " +
				"and, near MaxActive, the earlier lines win",
			cfg: Config{MaxActive: 150},
			run: func(t *testing.T, e *env) {
				s := e.scheduler(t)
				due := epoch.Add(time.Hour).Format(time.RFC3339)
				line := func(name string, payload int) string {
					return fmt.Sprintf(`{"kind":"timer","name":%q,"componentId":"test-action","method":"run","payload":%d,"dueAt":%q}`,
						name, payload, due)
				}
				var lines []string
				for i := range 3 * importBatch { // ten names, each many times
					lines = append(lines, line(fmt.Sprintf("n-%d", i%10), i))
				}
				for i := range 200 { // 140 fit beside the ten
					lines = append(lines, line(fmt.Sprintf("m-%03d", i), i))
				}
				rep, err := s.Import(t.Context(), strings.NewReader(strings.Join(lines, "\n")), false)
				if err != nil {
					t.Fatal(err)
				}
				if rep.Imported != 3*importBatch+140 || rep.RefusedCount != 60 || rep.Refused[0].Line != 3*importBatch+141 {
					t.Fatalf("report %+v: want every n line and the first 140 m lines imported, the last 60 refused", rep)
				}
				for k := range 10 {
					tm, err := s.Get(t.Context(), fmt.Sprintf("n-%d", k))
					last := k
					for last+10 < 3*importBatch {
						last += 10
					}
					if err != nil || string(tm.Call.Argument) != fmt.Sprint(last) {
						t.Fatalf("n-%d = %s, %v; want the payload of its last line, %d", k, tm.Call.Argument, err, last)
					}
				}
				if _, err := s.Get(t.Context(), "m-139"); err != nil {
					t.Fatalf("m-139, within the limit: %v", err)
				}
				if _, err := s.Get(t.Context(), "m-140"); !errors.Is(err, ErrNotFound) {
					t.Fatalf("m-140, over the limit: %v, want not found", err)
				}
			},
		},
		{
			name: "ImportJobRunsInTheBackground",
			property: "StartImport stores a running job at once, then its record (readable by id) ends done with the report " +
				"Import gives; a job stopped by its context ends interrupted with what it did; an unknown id is not found",
			run: func(t *testing.T, e *env) {
				s := e.scheduler(t)
				due := epoch.Add(time.Hour).Format(time.RFC3339)
				var lines []string
				for i := range 2*importJobEvery + 3 {
					lines = append(lines, fmt.Sprintf(`{"kind":"timer","name":"j-%d","componentId":"test-action","method":"run","payload":%d,"dueAt":%q}`, i, i, due))
				}
				lines = append(lines, `{"kind":"timer",`)
				body := []byte(strings.Join(lines, "\n"))
				job, err := s.StartImport(t.Context(), body, false)
				if err != nil || job.State != ImportRunning || job.ID == "" {
					t.Fatalf("StartImport = %+v, %v; want a running job", job, err)
				}
				got := waitImportJob(t, s, job.ID)
				if got.State != ImportDone || got.Report.Imported != 2*importJobEvery+3 || got.Report.RefusedCount != 1 ||
					got.Report.Refused[0].Line != len(lines) {
					t.Fatalf("job = %+v; want done, every timer imported and the last line refused", got)
				}
				if _, err := s.Get(t.Context(), fmt.Sprintf("j-%d", 2*importJobEvery+2)); err != nil {
					t.Fatalf("the last timer: %v", err)
				}

				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				stopped := ImportJob{ID: "stopped", State: ImportRunning}
				s.runImport(ctx, stopped, body)
				if got, err := s.ImportJob(t.Context(), "stopped"); err != nil || got.State != ImportInterrupted || got.Error == "" {
					t.Fatalf("a stopped job = %+v, %v; want interrupted, saying why", got, err)
				}
				if _, err := s.ImportJob(t.Context(), "no-such-job"); !errors.Is(err, ErrNotFound) {
					t.Fatalf("an unknown job: %v, want ErrNotFound", err)
				}
			},
		},
	}
}

// waitImportJob waits (bounded) for an import job to end.
func waitImportJob(t *testing.T, s *Scheduler, id string) ImportJob {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		job, err := s.ImportJob(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if job.State != ImportRunning {
			return job
		}
		if time.Now().After(deadline) {
			t.Fatalf("import job still running after 30 s: %+v", job)
		}
		time.Sleep(10 * time.Millisecond) // a poll, bounded by the deadline
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestExportImportIntoCluster moves -timers.move timers (2,000 by default;
// 50,000 for the full size) from one Redis to an empty Redis Cluster
// through Export and Import, then runs them there: every one fires once.
func TestExportImportIntoCluster(t *testing.T) {
	n := *flagMoveTimers
	clk := clockwork.NewFakeClockAt(epoch)
	from := newScheduler(t, newStore(t, redisKind, clk), newRecorder(clk), Config{})
	for i := range n {
		mustCreate(t, from, "move-"+strconv.Itoa(i), time.Duration(i%600)*time.Second, testCall(strconv.Itoa(i)))
	}
	began := time.Now()
	lines := exportAll(t, from)
	exported := time.Since(began)
	rec := newRecorder(clk)
	to := newScheduler(t, newStore(t, clusterKind, clk), rec, Config{})
	began = time.Now()
	rep, err := to.Import(t.Context(), bytes.NewReader(lines), false)
	t.Logf("%d timers: exported from one Redis in %v (%d bytes), imported into the cluster in %v",
		n, exported.Round(time.Millisecond), len(lines), time.Since(began).Round(time.Millisecond))
	if err != nil || rep.Imported != n || rep.RefusedCount != 0 {
		t.Fatalf("Import = %d imported, %d refused (%v), %v", rep.Imported, rep.RefusedCount, rep.Refused, err)
	}
	if err := to.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = to.Shutdown(context.Background()) })
	advanceTo(t, clk, to, epoch.Add(10*time.Minute))
	waitFor(t, "every moved timer to fire", func() bool { return rec.len() >= n })
	quiesce(t, to)
	if rec.len() != n || rec.distinct() != n {
		t.Fatalf("%d calls of %d distinct timers, want %d once each", rec.len(), rec.distinct(), n)
	}
	for _, c := range rec.all() {
		i, _ := strconv.Atoi(strings.TrimPrefix(c.firing.Name, "move-"))
		if want := epoch.Add(time.Duration(i%600) * time.Second); c.at.Before(want) {
			t.Fatalf("%s fired at %v, before its due time %v", c.firing.Name, c.at, want)
		}
	}
}
