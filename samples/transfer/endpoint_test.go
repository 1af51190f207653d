package transfer_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis/samples/transfer"
	"github.com/trellis-go/trellis/trellistest"
)

// TestHTTPWalkthrough runs the walkthrough of docs/workflows.md ("Over
// HTTP") on the embedded store: a transfer started with POST
// /transfers/{id} runs to its end, read with GET; a large one waits for
// its approval and ends once approved; and each bad request is answered
// with its error, naming what is wrong.
func TestHTTPWalkthrough(t *testing.T) {
	app := &transfer.App{}
	ts := trellistest.Start(t, app.Setup, trellistest.WithLogger(slog.New(slog.DiscardHandler)))
	ctx := context.Background()
	for _, w := range []string{"alice", "carol"} {
		if _, err := transfer.Deposit.Invoke(ctx, ts.Client, w, 5000); err != nil {
			t.Fatal(err)
		}
	}
	outcome := func(id string) string {
		var got transfer.Transfer
		trellistest.Eventually(t, 10*time.Second, "transfer "+id+" ends", func() bool {
			resp := ts.Get(t, "/transfers/"+id)
			if resp.Status != http.StatusOK {
				return false
			}
			resp.JSON(t, &got)
			return got.Outcome != ""
		})
		return got.Outcome
	}

	if resp := ts.Post(t, "/transfers/t-1", `{"from":"alice","to":"bob","amount":30}`); resp.Status != http.StatusCreated {
		t.Fatalf("POST /transfers/t-1: %d %s", resp.Status, resp.Body)
	}
	if got := outcome("t-1"); got != "done" {
		t.Errorf("t-1: %q, want done", got)
	}
	if resp := ts.Post(t, "/transfers/t-2", `{"from":"carol","to":"bob","amount":2000}`); resp.Status != http.StatusCreated {
		t.Fatalf("POST /transfers/t-2: %d %s", resp.Status, resp.Body)
	}
	trellistest.WaitWorkflow(t, app.Transfers, "t-2", 10*time.Second, "paused")
	if resp := ts.Post(t, "/transfers/t-2/approve", nil); resp.Status != http.StatusNoContent {
		t.Fatalf("approve t-2: %d %s", resp.Status, resp.Body)
	}
	if got := outcome("t-2"); got != "done" {
		t.Errorf("t-2: %q, want done", got)
	}

	for _, c := range []struct {
		name, method, path, body string
		status                   int
		names                    string
	}{
		{"started twice", "POST", "/transfers/t-1", `{"from":"alice","to":"bob","amount":30}`, 409, "started already"},
		{"no amount", "POST", "/transfers/t-3", `{"from":"alice","to":"bob","amount":0}`, 422, "positive amount"},
		{"to its own wallet", "POST", "/transfers/t-3", `{"from":"alice","to":"alice","amount":5}`, 422, "two wallets"},
		{"not JSON", "POST", "/transfers/t-3", `{"from":`, 400, ""},
		{"no such transfer", "GET", "/transfers/t-9", "", 404, "no transfer t-9"},
		{"approval of one that waits for none", "POST", "/transfers/t-1/approve", "", 409, "waits for no approval"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var body any
			if c.body != "" {
				body = c.body
			}
			resp := ts.Do(t, c.method, c.path, body)
			if resp.Status != c.status || !strings.Contains(string(resp.Body), c.names) {
				t.Errorf("%s %s: %d %s, want %d naming %q", c.method, c.path, resp.Status, resp.Body, c.status, c.names)
			}
		})
	}
}
