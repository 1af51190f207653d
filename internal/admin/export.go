package admin

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"

	"github.com/trellis-go/trellis/api"
	adminapi "github.com/trellis-go/trellis/api/admin"
	"github.com/trellis-go/trellis/timers"
)

// ExportTimers answers GET /admin/timers/export with every timer as JSON
// lines, streamed as the store is walked. An error once lines were sent
// can no longer change the status: the stream ends short, and the error
// is logged.
func (a *server) ExportTimers(w http.ResponseWriter, r *http.Request, params adminapi.ExportTimersParams) {
	export := a.timers.Export
	switch params.Layout {
	case "", adminapi.Current:
	case adminapi.Legacy:
		export = a.timers.ExportLegacy
	default:
		api.WriteError(w, r, api.InvalidField("layout", "must be current or legacy"))
		return
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	started := false
	err := export(r.Context(), func(rec timers.ExportRecord) error {
		if !started {
			started = true
			w.Header().Set("Content-Type", ContentTypeNDJSON)
			w.WriteHeader(http.StatusOK)
		}
		return enc.Encode(rec)
	})
	if err == nil && !started {
		w.Header().Set("Content-Type", ContentTypeNDJSON)
		w.WriteHeader(http.StatusOK)
	}
	if err == nil {
		err = bw.Flush()
	}
	switch {
	case err != nil && !started && errors.Is(err, timers.ErrInvalid):
		api.WriteError(w, r, api.InvalidField("layout", err.Error()))
	case err != nil && !started:
		api.WriteError(w, r, err)
	case err != nil:
		_ = bw.Flush()
		api.Logger(r.Context()).Error("timer export cut short", "err", err)
	}
}

// ImportPath is the path of the timer import, and MaxImportBytes its
// body limit: a whole export of the active limit's timers with 1 KB
// arguments and as many dead letters, where other requests take the
// service's MaxBodyBytes.
const (
	// ContentTypeNDJSON is the media type of an export and of an import's
	// body: JSON lines.
	ContentTypeNDJSON = "application/x-ndjson"
	ImportPath        = "/admin/timers/import"
	MaxImportBytes    = 256 << 20
)

// ImportTimers answers POST /admin/timers/import with the import's report.
func (a *server) ImportTimers(w http.ResponseWriter, r *http.Request, params adminapi.ImportTimersParams) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != ContentTypeNDJSON {
		api.WriteProblem(w, r, http.StatusUnsupportedMediaType, fmt.Sprintf(
			"the request body must be %s (JSON lines, as GET /admin/timers/export writes them), not %q",
			ContentTypeNDJSON, r.Header.Get("Content-Type")))
		return
	}
	if respondAsync(params.Prefer) {
		a.startImportJob(w, r, params.DryRun)
		return
	}
	rep, err := a.timers.Import(r.Context(), r.Body, params.DryRun)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		// The lines before the limit were imported; importing them again
		// replaces them with the same.
		api.WriteProblem(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf(
			"the request body is larger than %d bytes: the first %d lines were read; send the lines in smaller parts",
			tooLarge.Limit, rep.Lines))
		return
	}
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	api.WriteJSON(w, r, http.StatusOK, importReportJSON(rep))
}

func importReportJSON(rep timers.ImportReport) adminapi.ImportReport {
	out := adminapi.ImportReport{DryRun: rep.DryRun, Lines: rep.Lines, Imported: rep.Imported,
		RefusedCount: rep.RefusedCount, Refused: make([]adminapi.ImportRefusal, 0, len(rep.Refused))}
	for _, f := range rep.Refused {
		out.Refused = append(out.Refused, adminapi.ImportRefusal{Line: f.Line, Name: f.Name, Reason: f.Reason})
	}
	return out
}
