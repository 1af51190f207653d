package ordering_test

import (
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The walkthrough of docs/samples.md, run as it is written: the shell
// block between its walkthrough markers, in bash, against the real server
// started the way the page starts it. Only the address changes (the
// page's localhost:9000 becomes the test server's free port).
const (
	walkthroughPage   = "../../docs/samples.md"
	walkthroughBegin  = "<!-- walkthrough:begin"
	walkthroughEnd    = "<!-- walkthrough:end -->"
	walkthroughToken  = "walkthrough-admin-token"
	walkthroughExpiry = 3 * time.Second
)

// walkthrough returns the page's walkthrough block, after checking that
// the page starts the server with the settings this test uses.
func walkthrough(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(walkthroughPage)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	// The Redis on a port of its own, in the foreground (a taken port then
	// stops it with an error the reader sees), and the server on it.
	for _, setting := range []string{"TRELLIS_ORDER_EXPIRY=3s", "TRELLIS_ADMIN_TOKEN=" + walkthroughToken,
		"\nredis-server --port 6390 --appendonly yes --dir /tmp/trellis-walkthrough\n", "TRELLIS_REDIS_URL=redis://localhost:6390/0"} {
		if !strings.Contains(page, setting) {
			t.Fatalf("%s does not start the server with %s; update this test with it", walkthroughPage, setting)
		}
	}
	_, rest, ok := strings.Cut(page, walkthroughBegin)
	if !ok {
		t.Fatalf("%s has no %q marker", walkthroughPage, walkthroughBegin)
	}
	block, _, ok := strings.Cut(rest, walkthroughEnd)
	if !ok {
		t.Fatalf("%s has no %q marker", walkthroughPage, walkthroughEnd)
	}
	_, block, ok = strings.Cut(block, "```sh\n")
	if !ok {
		t.Fatal("the walkthrough has no ```sh block")
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatal("the walkthrough's ```sh block does not end")
	}
	return block
}

// Every command of the walkthrough works and prints what its
// comments say: against the server started as the page starts it, and
// against one with another expiry and token, given to the block in
// TRELLIS_ADMIN_TOKEN as the compose pair is (its waits must follow the
// expiry, and its token must be the server's).
func TestE2EReadmeWalkthrough(t *testing.T) {
	t.Parallel()
	block := walkthrough(t)
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the walkthrough needs %s (curl 7.84 or later): %v", tool, err)
		}
	}
	other := "compose-like-" + rand.Text()
	runs := []struct {
		name   string        // the case
		expiry time.Duration // the server's TRELLIS_ORDER_EXPIRY
		token  string        // the server's admin token
		env    []string      // the block's TRELLIS_ variables
	}{
		{"as written", walkthroughExpiry, walkthroughToken, nil},
		{"another expiry and token", 2 * walkthroughExpiry, other, []string{"TRELLIS_ADMIN_TOKEN=" + other}},
	}
	for _, run := range runs {
		t.Run(run.name, func(t *testing.T) {
			t.Parallel()
			cfg := newServerConfig(t, run.expiry)
			cfg.adminToken = run.token
			s := startServer(t, cfg)
			out := runWalkthrough(t, block, s.base, run.env)
			checkWalkthrough(t, out)
		})
	}
}

// runWalkthrough runs block in bash with localhost:9000 pointed at base
// and env added to the environment, and returns what it printed.
func runWalkthrough(t *testing.T, block, base string, env []string) string {
	t.Helper()
	script := strings.ReplaceAll(block, "localhost:9000", strings.TrimPrefix(base, "http://"))
	// The block waits for the expiry by asking, as a reader would: it runs
	// on real time against a real process. The bound is for a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Env = serverEnv(env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the walkthrough failed: %v\nstdout:\n%s\nstderr:\n%s", err, out, &stderr)
	}
	return string(out)
}

// checkWalkthrough checks each line the walkthrough printed against what
// its comments say.
func checkWalkthrough(t *testing.T, out string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	uuid := `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`
	order := regexp.MustCompile(`^/orders/(` + uuid + `)$`).FindStringSubmatch(lines[0])
	if order == nil {
		t.Fatalf("first line %q is not the order's URL; output:\n%s", lines[0], out)
	}
	id := order[1]
	want := []struct {
		what     string   // the command, as the walkthrough's comments name it
		contains []string // what its output line holds
	}{
		{"echo $ORDER", []string{"/orders/" + id}},
		{"GET the order", []string{`"id":"` + id + `"`, `"placed":true`, `"confirmed":false`}},
		{"GET its timer", []string{`"name":"order-expiration-timer-` + id + `"`, `"componentId":"order-timed-action"`, `"method":"expireOrder"`, `"payload":"` + id + `"`}},
		{"confirm", []string{`"id":"` + id + `"`, `"confirmed":true`}},
		{"list the timers", []string{`{"timers":[{`, `"name":"order-expiration-timer-`}},
		{"GET the expired order", []string{`"status":404`, `No order found for '`}},
		{"confirm the expired order", []string{`"status":404`, `No order found for `}},
		{"list the timers after the expiry", []string{`{"timers":[]}`}},
		{"timer stats", []string{`"active":0`, `"limit":50000`}},
		{"GET the confirmed order", []string{`"id":"` + id + `"`, `"confirmed":true`}},
		{"cancel the confirmed order", []string{`"outcome":"invalid"`, `"Cannot cancel an already confirmed order"`}},
		{"an invalid order", []string{`"status":400`, `"field":"item"`, `"field":"quantity"`}},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines of output, want %d:\n%s", len(lines), len(want), out)
	}
	for i, w := range want {
		for _, c := range w.contains {
			if !strings.Contains(lines[i], c) {
				t.Errorf("%s: %s\nwant it to contain %s", w.what, lines[i], c)
			}
		}
	}
	// The second order's timer is the only one listed before the expiry.
	if strings.Contains(lines[4], id) {
		t.Errorf("the confirmed order's timer is still listed: %s", lines[4])
	}
}
