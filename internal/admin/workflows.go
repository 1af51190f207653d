package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/trellis-go/trellis/api"
	adminapi "github.com/trellis-go/trellis/api/admin"
	"github.com/trellis-go/trellis/workflows"
)

// Bounds of GET /admin/workflows/{type}.
const (
	defaultWorkflowLimit = 100
	maxWorkflowLimit     = 1000
)

// ListWorkflowTypes answers GET /admin/workflows: the started workflow
// types and their steps.
func (a *server) ListWorkflowTypes(w http.ResponseWriter, r *http.Request) {
	out := []adminapi.WorkflowType{}
	if a.workflows != nil {
		for _, id := range a.workflows.Types() {
			wf, _ := a.workflows.Lookup(id)
			out = append(out, adminapi.WorkflowType{Type: id, Steps: wf.Steps()})
		}
	}
	api.WriteJSON(w, r, http.StatusOK, out)
}

// ListWorkflows answers GET /admin/workflows/{type}: its instances of the
// status asked, without their state and history.
func (a *server) ListWorkflows(w http.ResponseWriter, r *http.Request, typ string, params adminapi.ListWorkflowsParams) {
	wf, ok := a.workflow(w, r, typ)
	if !ok {
		return
	}
	limit := defaultWorkflowLimit
	if params.Limit != nil {
		if *params.Limit < 1 || *params.Limit > maxWorkflowLimit {
			api.WriteError(w, r, api.InvalidField("limit", fmt.Sprintf("must be from 1 to %d", maxWorkflowLimit)))
			return
		}
		limit = *params.Limit
	}
	if params.Status != "" && !params.Status.Valid() {
		api.WriteError(w, r, api.InvalidField("status", "must be one of running, paused, failed, ended"))
		return
	}
	recs, more, err := wf.List(r.Context(), workflows.Status(params.Status), limit)
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	out := adminapi.WorkflowPage{Workflows: make([]adminapi.Workflow, 0, len(recs)), More: more}
	for _, rec := range recs {
		rec.State, rec.History = nil, nil
		out.Workflows = append(out.Workflows, workflowJSON(rec))
	}
	api.WriteJSON(w, r, http.StatusOK, out)
}

// GetWorkflow answers GET /admin/workflows/{type}/{id}: the instance with
// its state and history, or 404 when it has not started.
func (a *server) GetWorkflow(w http.ResponseWriter, r *http.Request, typ, id string) {
	wf, ok := a.workflow(w, r, typ)
	if !ok {
		return
	}
	rec, err := wf.Inspect(r.Context(), id)
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	if rec.Status == workflows.StatusNotStarted {
		api.WriteProblem(w, r, http.StatusNotFound, fmt.Sprintf("workflow %s has no instance %q", typ, id))
		return
	}
	api.WriteJSON(w, r, http.StatusOK, workflowJSON(rec))
}

// OperateWorkflow answers POST /admin/workflows/{type}/{id}/actions: the
// instance after the action; a refusal is 404, 409 or 422 naming why.
func (a *server) OperateWorkflow(w http.ResponseWriter, r *http.Request, typ, id string) {
	wf, ok := a.workflow(w, r, typ)
	if !ok {
		return
	}
	var req adminapi.WorkflowAction
	if err := api.Decode(r, &req); err != nil {
		api.WriteError(w, r, err)
		return
	}
	if req.Step != "" && req.Action != adminapi.WorkflowActionActionSkip {
		api.WriteError(w, r, api.InvalidField("step", "is for the skip action only"))
		return
	}
	rec, err := wf.Operate(r.Context(), id, workflows.Operation{Action: workflows.Action(req.Action), Step: req.Step, Input: req.Input})
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	api.WriteJSON(w, r, http.StatusOK, workflowJSON(rec))
}

// workflow is the started workflow type typ, or false after a 404.
func (a *server) workflow(w http.ResponseWriter, r *http.Request, typ string) (workflows.Operated, bool) {
	if a.workflows != nil {
		if wf, ok := a.workflows.Lookup(typ); ok {
			return wf, true
		}
	}
	api.WriteProblem(w, r, http.StatusNotFound, fmt.Sprintf("no workflow type is called %q", typ))
	return nil, false
}

// workflowJSON is an instance as the contract shows it; times in UTC.
func workflowJSON(rec workflows.Record) adminapi.Workflow {
	out := adminapi.Workflow{Type: rec.Type, Id: rec.ID, Status: adminapi.WorkflowStatus(rec.Status), Suspended: rec.Suspended,
		Step: rec.Step, Input: absentIfNull(rec.Input), Attempt: rec.Attempt, Transition: int64(rec.Transition), Error: rec.Error,
		NotBefore: utc(rec.NotBefore), PauseUntil: utc(rec.PauseUntil), Deadline: utc(rec.Deadline), State: absentIfNull(rec.State)}
	for _, e := range rec.History {
		out.History = append(out.History, adminapi.WorkflowEntry{Transition: int64(e.Transition), Step: e.Step, Attempt: e.Attempt,
			Outcome: e.Outcome, Error: e.Error, Started: utc(e.Started), At: utc(e.At)})
	}
	return out
}

// absentIfNull is v, or nothing (left out of the JSON) when v is none
// or JSON null: the contract has a value there or none.
func absentIfNull(v json.RawMessage) json.RawMessage {
	if string(bytes.TrimSpace(v)) == "null" {
		return nil
	}
	return v
}

// utc is t in UTC; the zero time stays zero (left out of the JSON).
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}
