package admin

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/trellis-go/trellis/api"
	adminapi "github.com/trellis-go/trellis/api/admin"
	"github.com/trellis-go/trellis/timers"
)

// respondAsync reports whether a Prefer header asks for respond-async
// (RFC 7240: a list of preferences, each maybe with parameters).
func respondAsync(prefer string) bool {
	for p := range strings.SplitSeq(prefer, ",") {
		token, _, _ := strings.Cut(p, ";")
		if strings.EqualFold(strings.TrimSpace(token), "respond-async") {
			return true
		}
	}
	return false
}

// startImportJob reads the whole body of an import and answers 202 with
// the job that imports it in the background.
func (a *server) startImportJob(w http.ResponseWriter, r *http.Request, dryRun bool) {
	body, err := io.ReadAll(r.Body)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		api.WriteProblem(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf(
			"the request body is larger than %d bytes: nothing was imported; send the lines in smaller parts", tooLarge.Limit))
		return
	case err != nil:
		api.WriteError(w, r, &api.RequestError{Status: http.StatusBadRequest, Detail: "the request body could not be read", Err: err})
		return
	}
	job, err := a.timers.StartImport(r.Context(), body, dryRun)
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	w.Header().Set("Location", ImportJobsPath+job.ID)
	api.WriteJSON(w, r, http.StatusAccepted, importJobJSON(job))
}

// ImportJobsPath is where an import job is shown, under its id: outside
// /admin/timers/, where a second segment would be a timer's action.
const ImportJobsPath = "/admin/imports/"

// GetImportJob answers GET /admin/imports/{job}.
func (a *server) GetImportJob(w http.ResponseWriter, r *http.Request, id string) {
	job, err := a.timers.ImportJob(r.Context(), id)
	if errors.Is(err, timers.ErrNotFound) {
		api.WriteProblem(w, r, http.StatusNotFound, fmt.Sprintf("no import job has the id %q (or it ended more than %v ago)",
			id, timers.ImportJobRetention))
		return
	}
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	api.WriteJSON(w, r, http.StatusOK, importJobJSON(job))
}

func importJobJSON(j timers.ImportJob) adminapi.ImportJob {
	return adminapi.ImportJob{Id: j.ID, State: adminapi.ImportJobState(j.State), StartedAt: j.StartedAt, UpdatedAt: j.UpdatedAt,
		Report: importReportJSON(j.Report), Error: j.Error}
}
