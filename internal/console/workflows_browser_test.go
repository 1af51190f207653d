package console_test

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/workflows"
)

// TestConsoleWorkflowsInBrowser drives the workflows section in a real
// headless Chromium: two jobs waiting for their retry are listed with
// their step, attempt and error; one opens with its state and history;
// Suspend and Resume move it (resumed, it runs now and fails its last
// retry); the status filter lists the failed one; Skip to a chosen step
// ends it; Cancel asks for a second click, then ends the other. The
// section fits 1440 and 320 px.
func TestConsoleWorkflowsInBrowser(t *testing.T) {
	fixture.JobsFailing.Store(true)
	t.Cleanup(func() { fixture.JobsFailing.Store(false) })
	jobs := &fixture.Jobs{}
	ts := trellistest.Start(t, jobs.App, trellistest.WithConfig(func(c *trellis.Config) { c.AdminToken = fixture.AdminToken }))
	jobs.Begin(t, ts.Host(), "j-1", workflows.StatusRunning, 1)
	jobs.Begin(t, ts.Host(), "j-2", workflows.StatusRunning, 1)
	statusOf := func(id string) workflows.Status {
		in, err := jobs.Running.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return in.Status
	}

	b := newBrowser(t)
	b.signIn(ts.URL)
	b.waitFor("the workflows section", visible("workflows"))
	b.waitFor("two jobs", `document.querySelectorAll("#workflow-list tbody tr").length === 2`)
	row := func(id string) string { return `#workflow-list tr[data-id="` + id + `"]` }
	for sel, want := range map[string]string{
		row("j-1") + ` td[data-label=Status]`:  "running",
		row("j-1") + ` td[data-label=Step]`:    "work",
		row("j-1") + ` td[data-label=Attempt]`: "1",
		row("j-1") + ` td[data-label=Error]`:   "work: the printer is on fire",
	} {
		if got := b.text(sel); got != want {
			t.Errorf("%s: %q, want %q", sel, got, want)
		}
	}
	b.do("open j-1", chromedp.Click(chromedp.CSS(row("j-1")+` button.open`)))
	b.waitFor("j-1's history", visible("workflow-detail")+` && document.querySelectorAll("#workflow-history tbody tr").length === 2`)
	b.waitText(`#workflow-history tbody tr:nth-child(2) td[data-label=Outcome]`, "retry")
	b.waitText("#wd-title", "job · j-1")

	b.do("suspend j-1", chromedp.Click(chromedp.CSS(row("j-1")+` button.suspend`)))
	b.waitText(row("j-1")+` td[data-label=Status]`, "suspended")
	b.do("resume j-1", chromedp.Click(chromedp.CSS(row("j-1")+` button.resume`)))
	b.waitText(row("j-1")+` td[data-label=Status]`, "failed")
	b.do("list the failed", chromedp.Evaluate[chromedp.Void](
		`(s => { s.value = "failed"; s.dispatchEvent(new Event("change")); })(document.getElementById("wf-status"))`))
	b.waitFor("j-1 alone", `JSON.stringify([...document.querySelectorAll("#workflow-list tbody tr")].map(r => r.dataset.id)) === '["j-1"]'`)

	fits(b, 1440)
	b.do("to the workflows", chromedp.Evaluate[chromedp.Void](`document.getElementById("workflows").scrollIntoView()`))
	b.screenshot("console-workflows-1440.png", false)
	b.do("a phone's width", chromedp.EmulateViewport(320, 720))
	fits(b, 320)
	b.do("back to a desktop's width", chromedp.EmulateViewport(1440, 900))

	b.do("skip j-1 to after", chromedp.Evaluate[chromedp.Void](`document.querySelector(`+js(row("j-1")+` select.skip-to`)+`).value = "after"`),
		chromedp.Click(chromedp.CSS(row("j-1")+` button.skip`)))
	b.waitFor("no failed job", visible("workflow-empty"))
	if got := statusOf("j-1"); got != workflows.StatusEnded {
		t.Errorf("j-1 is %q after its skip to after, want ended", got)
	}

	b.do("list every job", chromedp.Evaluate[chromedp.Void](
		`(s => { s.value = ""; s.dispatchEvent(new Event("change")); })(document.getElementById("wf-status"))`))
	b.do("cancel j-2 once", chromedp.Click(chromedp.CSS(row("j-2")+` button.cancel`)))
	b.waitText(row("j-2")+` button.cancel`, "Confirm cancel")
	if got := statusOf("j-2"); got != workflows.StatusRunning {
		t.Fatalf("one click made j-2 %q", got)
	}
	b.do("confirm", chromedp.Click(chromedp.CSS(row("j-2")+` button.cancel`)))
	b.waitText(row("j-2")+` td[data-label=Status]`, "ended")
	b.checkNoProblems()
}
