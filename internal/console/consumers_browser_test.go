package console_test

import (
	"context"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/consumers"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/trellistest"
)

// TestConsoleConsumersInBrowser drives the consumers section in a real
// headless Chromium: a consumer with a change being retried shows its lag
// (one change, and its age); its two dead letters are listed with their
// entity, revision, attempts and error; Retry, once the handler is
// fixed, handles one (gone from the list, the handler got it); Drop asks
// for a second click, then drops the other. The section fits 1440 and
// 320 px.
func TestConsoleConsumersInBrowser(t *testing.T) {
	n := fixture.NewNotices()
	ts := trellistest.Start(t, n.App, trellistest.WithConfig(func(c *trellis.Config) { c.AdminToken = fixture.AdminToken }))
	runner := ts.Host().Consumers()
	n.Bury(t, ts, "p-1", "p-2")
	n.SetFailing("p-3", true)
	fixture.Increase(t, ts, "p-3") // failed, retried in 3 s of the fake clock, which stands still
	testenv.Eventually(t, 10*time.Second, "p-3's change counted as lag", func() bool {
		return runner.Lag()[fixture.NoticesID].Changes == 1
	})
	deadOf := func(id string) bool {
		dead, err := runner.DeadLetters(context.Background(), fixture.NoticesID)
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(dead, func(d consumers.DeadLetter) bool { return d.EntityID == id })
	}

	b := newBrowser(t)
	b.signIn(ts.URL)
	b.waitFor("the consumers section", visible("consumers"))
	b.waitFor("two dead letters", `document.querySelectorAll("#consumer-dead tbody tr").length === 2`)

	row := `#consumer-list tr[data-id="` + fixture.NoticesID + `"]`
	if got := b.text(row + ` td[data-label=Lag]`); got != "1 change" {
		t.Errorf("lag %q, want 1 change", got)
	}
	if got := b.text(row + ` td[data-label="Oldest unhandled"]`); !regexp.MustCompile(`^\d+\.\d s ago$`).MatchString(got) {
		t.Errorf("oldest unhandled %q, want its age", got)
	}
	if got := b.text(row + ` td[data-label="Dead letters"]`); got != "2" {
		t.Errorf("dead letters %q, want 2", got)
	}
	if !eval[bool](b, `document.querySelector(`+js(row)+`).classList.contains("behind")`) {
		t.Error("the consumer with a change not handled is not marked behind")
	}
	dead := func(id string) string { return `#consumer-dead tr[data-entity="` + id + `"]` }
	for sel, want := range map[string]string{
		dead("p-1") + ` td[data-label=Entity]`:       "counter · p-1",
		dead("p-1") + ` td[data-label=Revision]`:     "1",
		dead("p-1") + ` td[data-label=Attempts]`:     "2",
		dead("p-1") + ` td[data-label="Last error"]`: "mail the notice of counter p-1: mail server refused",
	} {
		if got := b.text(sel); got != want {
			t.Errorf("%s: %q, want %q", sel, got, want)
		}
	}
	fits(b, 1440)
	b.do("to the consumers", chromedp.Evaluate[chromedp.Void](`document.getElementById("consumers").scrollIntoView()`))
	b.screenshot("console-consumers-1440.png", false)
	b.do("a phone's width", chromedp.EmulateViewport(320, 720))
	fits(b, 320)
	b.do("back to a desktop's width", chromedp.EmulateViewport(1440, 900))

	n.SetFailing("p-1", false)
	b.do("retry p-1", chromedp.Click(chromedp.CSS(dead("p-1")+` button.retry`)))
	b.waitFor("p-1 gone from the dead letters", `!document.querySelector(`+js(dead("p-1"))+`)`)
	if got := n.Handled("p-1"); !slices.Equal(got, []int64{1}) {
		t.Errorf("the handler got p-1 as %v, want [1]", got)
	}

	b.do("drop p-2 once", chromedp.Click(chromedp.CSS(dead("p-2")+` button.drop`)))
	if !deadOf("p-2") {
		t.Fatal("one click dropped p-2")
	}
	b.waitText(dead("p-2")+` button.drop`, "Confirm drop")
	b.do("confirm", chromedp.Click(chromedp.CSS(dead("p-2")+` button.drop`)))
	b.waitFor("no dead letter", visible("consumer-dead-empty"))
	if deadOf("p-2") {
		t.Error("p-2 is still a dead letter after the confirmed drop")
	}
	b.checkNoProblems()
}
