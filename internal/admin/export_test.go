package admin_test

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/api/admin"
	iadmin "github.com/trellis-go/trellis/internal/admin"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/timers"
	"github.com/trellis-go/trellis/trellistest"
)

// TestAdminExportImport: the timers of a service on the embedded store
// (single, recurring, dead) are exported as JSON lines and imported into a
// service on Redis, a bad line refused by number; a dry run stores
// nothing; the legacy layout of a memory store is a 400.
func TestAdminExportImport(t *testing.T) {
	from := fixture.Start(t, fixture.AdminToken)
	sched := from.Host().Timers
	if _, err := sched.Create(t.Context(), "single/1", time.Hour, fixture.Call(t, false, "s1")); err != nil {
		t.Fatal(err)
	}
	if _, err := sched.CreateRecurring(t.Context(), "nightly", timers.Schedule{Cron: "0 2 * * *", TimeZone: "Europe/Paris"},
		fixture.Call(t, false, "n")); err != nil {
		t.Fatal(err)
	}
	fixture.GiveUp(t, from, "dead/1")

	resp := fixture.Admin(t, from, http.MethodGet, "/admin/timers/export")
	if resp.Status != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" ||
		bytes.Count(resp.Body, []byte("\n")) != 3 {
		t.Fatalf("export: %d %s\n%s", resp.Status, resp.Header.Get("Content-Type"), resp.Body)
	}
	lines := string(resp.Body)
	bad := lines[:strings.Index(lines, "\n")+1] + "{not json\n" + lines[strings.Index(lines, "\n")+1:]

	to := fixture.Start(t, fixture.AdminToken, fixture.Stores[1].Opts(t)...)
	for _, dry := range []string{"true", "false"} {
		resp = sendBody(t, to, http.MethodPost, "/admin/timers/import?dryRun="+dry, "application/x-ndjson", bad)
		var rep admin.ImportReport
		resp.JSON(t, &rep)
		if resp.Status != http.StatusOK || rep.Imported != 3 || rep.RefusedCount != 1 || rep.Refused[0].Line != 2 || rep.Lines != 4 {
			t.Fatalf("import dryRun=%s: %d %s", dry, resp.Status, resp.Body)
		}
		listed, _ := listAll(t, to, nil, 0, 2)
		if want := map[string]int{"true": 0, "false": 2}[dry]; len(listed) != want {
			t.Errorf("dryRun=%s: %d timers after, want %d", dry, len(listed), want)
		}
	}
	var tm admin.Timer
	fixture.Admin(t, to, http.MethodGet, timerPath("nightly")).JSON(t, &tm)
	if tm.Recurring.Schedule.Cron != "0 2 * * *" || len(tm.Recurring.NextRuns) != 5 {
		t.Errorf("nightly imported as %+v", tm)
	}
	if resp := fixture.Admin(t, to, http.MethodGet, deadLetterPath("dead/1")); resp.Status != http.StatusOK {
		t.Errorf("the dead letter after import: %d", resp.Status)
	}
	if resp := fixture.Admin(t, from, http.MethodGet, "/admin/timers/export?layout=legacy"); resp.Status != http.StatusBadRequest {
		t.Errorf("legacy export of the memory store: %d %s, want 400", resp.Status, resp.Body)
	}
}

// TestAdminImportTakesALargeBody: the import takes a whole export larger
// than the service's MaxBodyBytes (its own limit is admin.MaxImportBytes),
// while every other route keeps MaxBodyBytes.
func TestAdminImportTakesALargeBody(t *testing.T) {
	const timersToMove, small = 60, 2048
	from := fixture.Start(t, fixture.AdminToken)
	for i := range timersToMove {
		call := fixture.Call(t, false, strings.Repeat("x", 100)+strconv.Itoa(i))
		if _, err := from.Host().Timers.Create(t.Context(), "moved/"+strconv.Itoa(i), time.Hour, call); err != nil {
			t.Fatal(err)
		}
	}
	export := fixture.Admin(t, from, http.MethodGet, "/admin/timers/export")
	if export.Status != http.StatusOK || len(export.Body) <= small {
		t.Fatalf("export: %d, %d bytes, want 200 and more than %d", export.Status, len(export.Body), small)
	}
	limited := trellistest.WithConfig(func(c *trellis.Config) { c.MaxBodyBytes = small })
	to := fixture.Start(t, fixture.AdminToken, limited)
	resp := sendBody(t, to, http.MethodPost, iadmin.ImportPath, "application/x-ndjson", string(export.Body))
	var rep admin.ImportReport
	resp.JSON(t, &rep)
	if resp.Status != http.StatusOK || rep.Imported != timersToMove {
		t.Fatalf("import of %d bytes with MaxBodyBytes %d: %d %s", len(export.Body), small, resp.Status, resp.Body)
	}
	big := `{"name":"` + strings.Repeat("y", small) + `"}`
	if resp := sendBody(t, to, http.MethodPut, timerPath("big"), "application/json", big); resp.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("another admin route with a %d-byte body: %d, want 413", len(big), resp.Status)
	}
}

// TestAdminBodyMediaTypes: the import takes JSON lines only and the
// recurring timer's PUT JSON only; another media type, or none for the
// import, is a 415 problem (which the contract lists).
func TestAdminBodyMediaTypes(t *testing.T) {
	ts := fixture.Start(t, fixture.AdminToken)
	tests := []struct {
		name, method, path, contentType, body string
	}{
		{"import as text", http.MethodPost, iadmin.ImportPath, "text/plain", "{}\n"},
		{"import without a media type", http.MethodPost, iadmin.ImportPath, "", "{}\n"},
		{"import as JSON", http.MethodPost, iadmin.ImportPath, "application/json", "{}\n"},
		{"recurring timer as text", http.MethodPut, timerPath("nightly"), "text/plain", nightlyBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := sendBody(t, ts, tt.method, tt.path, tt.contentType, tt.body)
			if resp.Status != http.StatusUnsupportedMediaType {
				t.Fatalf("%d %s, want 415", resp.Status, resp.Body)
			}
			resp.Problem(t)
		})
	}
}
