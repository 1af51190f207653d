package console_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/samples/counter"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/views"
)

type counterRow struct {
	Value int64 `json:"value"`
}

var counterValues = views.Define("counter-values", counter.Entity, func(c views.Change[counter.Counter]) views.Update[counterRow] {
	if c.Deleted {
		return views.Delete[counterRow]()
	}
	return views.Upsert(counterRow{Value: c.State.Value})
})

// TestConsoleViewsInBrowser drives the views section in a real headless
// Chromium: the service's view is listed with its generation, answering,
// projected on every shard, caught up. The section fits 1440 and 320 px.
func TestConsoleViewsInBrowser(t *testing.T) {
	app := func(h *trellis.Host, r chi.Router) error {
		if err := fixture.App(h, r); err != nil {
			return err
		}
		return counterValues.Start(h.Views())
	}
	ts := trellistest.Start(t, app, trellistest.WithConfig(func(c *trellis.Config) { c.AdminToken = fixture.AdminToken }))
	fixture.Increase(t, ts, "v-1")

	b := newBrowser(t)
	b.signIn(ts.URL)
	b.waitFor("the views section", visible("views"))
	row := `#view-list tr[data-name="counter-values"]`
	b.waitText(row+` td[data-label="Shards here"]`, "256")
	b.waitText(row+` td[data-label=Lag]`, "0 changes")
	for sel, want := range map[string]string{
		row + ` td[data-label=State]`:              "answering",
		row + ` td[data-label="Oldest unapplied"]`: "—",
	} {
		if got := b.text(sel); got != want {
			t.Errorf("%s: %q, want %q", sel, got, want)
		}
	}
	if got := b.text(row + ` td[data-label=Generation]`); !strings.HasPrefix(got, "counter-values@") {
		t.Errorf("generation %q, want counter-values@…", got)
	}
	fits(b, 1440)
	b.do("to the views", chromedp.Evaluate[chromedp.Void](`document.getElementById("views").scrollIntoView()`))
	b.screenshot("console-views-1440.png", false)
	b.do("a phone's width", chromedp.EmulateViewport(320, 720))
	fits(b, 320)
	b.checkNoProblems()
}
