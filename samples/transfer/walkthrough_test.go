package transfer_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// walkthroughPage holds the walkthrough TestHTTPWalkthrough runs, between
// its markers.
const (
	walkthroughPage  = "../../docs/workflows.md"
	walkthroughBegin = "<!-- walkthrough:begin -->"
	walkthroughEnd   = "<!-- walkthrough:end -->"
)

// walkLine is one curl line of the walkthrough: the command and what its
// comment says.
type walkLine struct {
	command, comment string
	status           int
}

// statusIn is the status a line's comment starts with.
var statusIn = regexp.MustCompile(`^(\d{3})\b`)

// walkthrough reads the page's block: the lines before the first curl
// (shell settings every line runs after) and the curl lines.
func walkthrough(t *testing.T) (prelude string, lines []walkLine) {
	t.Helper()
	b, err := os.ReadFile(walkthroughPage)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), walkthroughBegin)
	block, _, ok2 := strings.Cut(rest, walkthroughEnd)
	_, block, ok3 := strings.Cut(block, "```sh\n")
	block, _, ok4 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 || !ok4 {
		t.Fatalf("%s has no ```sh block between %q and %q", walkthroughPage, walkthroughBegin, walkthroughEnd)
	}
	for raw := range strings.Lines(block) {
		command, comment, _ := strings.Cut(strings.TrimSpace(raw), " # ")
		command, comment = strings.TrimSpace(command), strings.TrimSpace(comment)
		if !strings.HasPrefix(command, "curl ") {
			prelude += raw
			continue
		}
		m := statusIn.FindStringSubmatch(comment)
		if m == nil {
			t.Fatalf("%s: the comment of %q gives no status", walkthroughPage, command)
		}
		status, _ := strconv.Atoi(m[1])
		lines = append(lines, walkLine{command: command, comment: comment, status: status})
	}
	if len(lines) == 0 {
		t.Fatalf("%s: the walkthrough has no curl line", walkthroughPage)
	}
	return prelude, lines
}

// run runs the line in bash after prelude, its localhost:9000 pointed at
// base, and returns the status and body curl got.
func (l walkLine) run(t *testing.T, prelude, base string) (int, string) {
	t.Helper()
	script := prelude + strings.ReplaceAll(l.command, "localhost:9000", strings.TrimPrefix(base, "http://")) +
		` -s -w '\n%{http_code}'`
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script).Output()
	if err != nil {
		t.Fatalf("%s: %v", l.command, err)
	}
	i := strings.LastIndexByte(string(out), '\n')
	status, err := strconv.Atoi(string(out[i+1:]))
	if err != nil {
		t.Fatalf("%s: no status in curl's output %q", l.command, out)
	}
	return status, string(out[:max(i, 0)])
}

// holds reports whether body has every field of the JSON object the
// line's comment shows (true when it shows none).
func (l walkLine) holds(t *testing.T, body string) bool {
	t.Helper()
	i, j := strings.IndexByte(l.comment, '{'), strings.LastIndexByte(l.comment, '}')
	if i < 0 || j < i {
		return true
	}
	var want, got map[string]any
	if err := json.Unmarshal([]byte(l.comment[i:j+1]), &want); err != nil {
		t.Fatalf("the comment of %q: %v", l.command, err)
	}
	if json.Unmarshal([]byte(body), &got) != nil {
		return false
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			return false
		}
	}
	return true
}
