package transfer_test

import (
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis/samples/transfer"
	"github.com/trellis-go/trellis/trellistest"
)

// TestHTTPWalkthrough runs the walkthrough of docs/workflows.md ("Over
// HTTP") as it is written, on the embedded store: each line of its block
// in bash, with curl, against the sample's routes (its localhost:9000
// pointed at the test's server), answered with the status its comment
// gives (a line whose comment says "once" is asked again until it is, and
// its body then holds the JSON the comment shows). Then each bad request
// is answered with its error, naming what is wrong.
func TestHTTPWalkthrough(t *testing.T) {
	app := &transfer.App{}
	ts := trellistest.Start(t, app.Setup, trellistest.WithLogger(slog.New(slog.DiscardHandler)))
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the walkthrough needs %s: %v", tool, err)
		}
	}
	prelude, lines := walkthrough(t)
	for _, line := range lines {
		if strings.Contains(line.comment, "once") {
			trellistest.Eventually(t, 10*time.Second, line.command+" # "+line.comment, func() bool {
				status, body := line.run(t, prelude, ts.URL)
				return status == line.status && line.holds(t, body)
			})
			continue
		}
		if status, body := line.run(t, prelude, ts.URL); status != line.status {
			t.Errorf("%s: %d %s, want %d (%s)", line.command, status, body, line.status, line.comment)
		}
	}

	for _, c := range []struct {
		name, method, path, body string
		status                   int
		names                    string
	}{
		{"started twice", "POST", "/transfers/t-1", `{"from":"alice","to":"bob","amount":30}`, 409, "started already"},
		{"no amount", "POST", "/transfers/t-3", `{"from":"alice","to":"bob","amount":0}`, 422, "positive amount"},
		{"to its own wallet", "POST", "/transfers/t-3", `{"from":"alice","to":"alice","amount":5}`, 422, "two wallets"},
		{"from the fees wallet", "POST", "/transfers/t-3", `{"from":"fees","to":"bob","amount":5}`, 422, "fees wallet takes part in no transfer"},
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
