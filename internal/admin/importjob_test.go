package admin_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis/api/admin"
	iadmin "github.com/trellis-go/trellis/internal/admin"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
)

// TestAdminImportJob: an import sent with Prefer: respond-async is
// answered 202 with its job at once; the job's address shows it running
// or ended, and once ended its whole report; an unknown job is a 404.
func TestAdminImportJob(t *testing.T) {
	for _, st := range fixture.Stores {
		t.Run(st.Name, func(t *testing.T) {
			ts := fixture.Start(t, fixture.AdminToken, st.Opts(t)...)
			due := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
			var lines []string
			for i := range 1000 {
				lines = append(lines, fmt.Sprintf(`{"kind":"timer","name":"job/%d","componentId":%q,"method":"expireOrder","payload":%d,"dueAt":%q}`,
					i, fixture.ActionID, i, due))
			}
			lines = append(lines, "{not json")
			resp := sendBody(t, ts, http.MethodPost, iadmin.ImportPath, "application/x-ndjson", strings.Join(lines, "\n"),
				"Prefer", "respond-async, wait=10")
			var job admin.ImportJob
			resp.JSON(t, &job)
			loc := resp.Header.Get("Location")
			if resp.Status != http.StatusAccepted || job.Id == "" || loc != iadmin.ImportJobsPath+job.Id {
				t.Fatalf("async import: %d, Location %q, %s", resp.Status, loc, resp.Body)
			}
			deadline := time.Now().Add(30 * time.Second)
			for job.State == admin.ImportJobStateRunning {
				if time.Now().After(deadline) {
					t.Fatalf("the job still runs after 30 s: %+v", job)
				}
				time.Sleep(10 * time.Millisecond) // a poll, bounded by the deadline
				got := fixture.Admin(t, ts, http.MethodGet, loc)
				if got.Status != http.StatusOK {
					t.Fatalf("GET %s: %d %s", loc, got.Status, got.Body)
				}
				got.JSON(t, &job)
			}
			if job.State != admin.ImportJobStateDone || job.Report.Imported != 1000 || job.Report.RefusedCount != 1 || job.Report.Refused[0].Line != 1001 {
				t.Fatalf("the job ended as %+v; want done, 1000 imported, line 1001 refused", job)
			}
			if got := fixture.Admin(t, ts, http.MethodGet, iadmin.ImportJobsPath+"no-such-job"); got.Status != http.StatusNotFound {
				t.Fatalf("an unknown job: %d %s, want 404", got.Status, got.Body)
			}
		})
	}
}
