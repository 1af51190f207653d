package console_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/timers"
)

// TestConsoleRecurringInBrowser drives the recurring timers in a real
// headless Chromium: the list marks a recurring timer and filters to
// recurring ones only; its detail shows the schedule and the next runs;
// Pause and Resume change it in the store and on the page.
func TestConsoleRecurringInBrowser(t *testing.T) {
	ts := fixture.Start(t, fixture.AdminToken)
	sched := ts.Service.Host().Timers
	if _, err := sched.Create(t.Context(), "single", 48*time.Hour, fixture.Call(t, false, "s")); err != nil {
		t.Fatal(err)
	}
	if _, err := sched.CreateRecurring(t.Context(), "nightly", timers.Schedule{Cron: "0 2 * * *", TimeZone: "Europe/Paris"},
		fixture.Call(t, false, "n")); err != nil {
		t.Fatal(err)
	}
	paused := func(want bool) func() bool {
		return func() bool {
			tm, err := sched.Get(context.Background(), "nightly")
			return err == nil && tm.Recurring != nil && tm.Recurring.Paused == want
		}
	}

	b := newBrowser(t)
	b.do("open the console", chromedp.EmulateViewport(1440, 900), chromedp.Navigate(ts.URL+"/admin/console/"))
	b.waitFor("the sign-in form", visible("login-view"))
	b.do("sign in", chromedp.SendKeys(chromedp.ID("token"), fixture.AdminToken), chromedp.Click(chromedp.CSS(`#login button[type=submit]`)))
	b.waitRows("nightly", "single")
	b.waitText(`#timers tr[data-name="nightly"] td[data-label=Status]`, "recurring")
	b.do("recurring only", chromedp.Click(chromedp.ID("f-recurring")))
	b.waitRows("nightly")

	b.do("open nightly", chromedp.Click(chromedp.CSS(`#timers tr[data-name="nightly"] button.link`)))
	b.waitText("#d-schedule", "cron 0 2 * * * (Europe/Paris)")
	b.waitFor("five next runs", `document.querySelectorAll("#d-next-runs li").length === 5`)
	b.waitText("#detail-pause", "Pause")

	b.do("pause", chromedp.Click(chromedp.ID("detail-pause")))
	testenv.Eventually(t, 10*time.Second, "nightly paused in the store", paused(true))
	b.waitText("#detail-pause", "Resume")
	b.waitText(`#timers tr[data-name="nightly"] td[data-label=Status]`, "paused")
	b.waitFor("no next run", `document.querySelectorAll("#d-next-runs li").length === 0`)

	b.do("resume", chromedp.Click(chromedp.ID("detail-pause")))
	testenv.Eventually(t, 10*time.Second, "nightly running again in the store", paused(false))
	b.waitText("#detail-pause", "Pause")
	b.waitText(`#timers tr[data-name="nightly"] td[data-label=Status]`, "recurring")

	b.do("open the single timer", chromedp.Click(chromedp.ID("f-recurring")))
	b.waitRows("nightly", "single")
	b.do("open single", chromedp.Click(chromedp.CSS(`#timers tr[data-name="single"] button.link`)))
	b.waitFor("no pause for a single timer", `document.getElementById("detail-pause").hidden && document.getElementById("d-schedule").hidden`)
	b.checkNoProblems()
}
