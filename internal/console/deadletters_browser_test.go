package console_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestConsoleDeadLettersInBrowser drives the dead-letter section in a real
// headless Chromium: two timers that gave up are listed with their call,
// attempts and error; Retry makes one an active timer again (gone from
// the section, back in the timer list); Delete asks for a second click,
// then removes the other.
func TestConsoleDeadLettersInBrowser(t *testing.T) {
	ts := fixture.Start(t, fixture.AdminToken)
	sched := ts.Service.Host().Timers
	fixture.GiveUp(t, ts, "dead-1", "dead-2")

	b := newBrowser(t)
	b.signIn(ts.URL)
	b.waitFor("two dead letters", `document.querySelectorAll("#dead-letters tbody tr").length === 2`)
	if got := b.text(`#dead-letters tr[data-name="dead-1"] td[data-label=Attempts]`); got != "2" {
		t.Errorf("dead-1's attempts %q, want 2", got)
	}
	if got := b.text(`#dead-letters tr[data-name="dead-1"] td[data-label="Last error"]`); got == "" {
		t.Error("dead-1 shows no last error")
	}
	b.waitRows() // no active timer

	// The filters match the call exactly: both failed in chargePayment.
	b.do("filter by another method", chromedp.SendKeys(chromedp.ID("df-method"), "expireOrder"),
		chromedp.Click(chromedp.CSS(`#dead-filters button[type=submit]`)))
	b.waitFor("no dead letter matches", visible("dead-empty"))
	b.do("filter by their method", chromedp.SetValue(chromedp.ID("df-method"), "chargePayment"),
		chromedp.Click(chromedp.CSS(`#dead-filters button[type=submit]`)))
	b.waitFor("both again", `document.querySelectorAll("#dead-letters tbody tr").length === 2`)

	b.do("retry dead-1", chromedp.Click(chromedp.CSS(`#dead-letters tr[data-name="dead-1"] button.retry`)))
	b.waitFor("dead-1 gone from the dead letters", `!document.querySelector('#dead-letters tr[data-name="dead-1"]')`)
	b.waitRows("dead-1")

	b.do("delete dead-2 once", chromedp.Click(chromedp.CSS(`#dead-letters tr[data-name="dead-2"] button.delete`)))
	if _, err := sched.GetDeadLetter(context.Background(), "dead-2"); err != nil {
		t.Fatalf("one click deleted dead-2: %v", err)
	}
	b.waitText(`#dead-letters tr[data-name="dead-2"] button.delete`, "Confirm delete")
	b.do("confirm", chromedp.Click(chromedp.CSS(`#dead-letters tr[data-name="dead-2"] button.delete`)))
	b.waitFor("no dead letter", visible("dead-empty"))
	testenv.Eventually(t, 10*time.Second, "dead-2 deleted", func() bool {
		_, err := sched.GetDeadLetter(context.Background(), "dead-2")
		return err != nil
	})
	b.checkNoProblems()
}
