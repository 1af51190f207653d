package main

import (
	"log/slog"
	"net/http"
	"testing"
	"time"

	"example.com/cartservice/cartapi"
	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/workflows"
)

// start runs the service on the embedded store and a fake clock, its
// responses checked against the contract.
func start(t *testing.T) *trellistest.Service {
	idle := 10 * time.Minute
	ts := trellistest.Start(t, setup(&idle), trellistest.WithServiceOptions(trellis.WithContract(cartapi.Spec)),
		trellistest.WithLogger(slog.New(slog.DiscardHandler)))
	ts.HTTP.Transport = trellistest.CheckContracts(t, ts.HTTP.Transport, cartapi.Spec)
	return ts
}

// checkouts is the checkout workflow as started on ts, for WaitWorkflow.
func checkouts(t testing.TB, ts *trellistest.Service) *workflows.Running[Order] {
	t.Helper()
	wf, ok := Checkouts.Running(ts.Host().Workflows())
	if !ok {
		t.Fatal("the checkout workflow is not started")
	}
	return wf
}

// settle waits until order id has ended, moving the fake clock on to
// each retry's time while the order waits for it (no step runs then).
func settle(t testing.TB, ts *trellistest.Service, id string) workflows.Instance[Order] {
	t.Helper()
	return trellistest.RunWorkflow(t, ts, checkouts(t, ts), id, 20*time.Second, workflows.StatusEnded, workflows.StatusFailed)
}

// post sends a POST and fails the test unless it is answered with want.
func post(t testing.TB, ts *trellistest.Service, path string, body any, want int) *trellistest.Response {
	t.Helper()
	resp := ts.Do(t, http.MethodPost, path, body)
	if resp.Status != want {
		t.Fatalf("POST %s: %d %s, want %d", path, resp.Status, resp.Body, want)
	}
	return resp
}

// checkedOut fills cart id with items (quantities by SKU) and checks it out.
func checkedOut(t testing.TB, ts *trellistest.Service, id string, items map[string]int) {
	t.Helper()
	for sku, n := range items {
		post(t, ts, "/carts/"+id+"/items", map[string]any{"sku": sku, "quantity": n}, http.StatusOK)
	}
	post(t, ts, "/carts/"+id+"/checkout", nil, http.StatusOK)
}

// problemFields are the fields a problem names, with what is wrong with
// each.
func problemFields(p api.Problem) string {
	s := ""
	for _, f := range p.Errors {
		s += " " + f.Field + ": " + f.Message
	}
	return s
}
