package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/samples/ledger"
	"github.com/trellis-go/trellis/trellistest"
)

// TestConsoleJournalsInBrowser drives the journals section in a real
// headless Chromium: an account of the ledger with 55 deposits (a
// snapshot after 50) shows its last event, its snapshot and state, and
// its events newest first, 20 a page, down to event 1 and back; a deposit
// made meanwhile appears on the newest page without a reload; an account
// whose covered events were dropped pages no further than its first kept
// event; an unknown one shows no event, and an event the code does not
// know shows the load error. The section fits 1440 and 320 px.
func TestConsoleJournalsInBrowser(t *testing.T) {
	app := func(h *trellis.Host, r chi.Router) error {
		if err := fixture.App(h, r); err != nil {
			return err
		}
		return ledger.Setup(h, r)
	}
	ts := trellistest.Start(t, app, trellistest.WithConfig(func(c *trellis.Config) { c.AdminToken = fixture.AdminToken }))
	ctx := context.Background()
	deposit := func(id string, amount int64) {
		t.Helper()
		if _, err := ledger.Deposit.Invoke(ctx, ts.Client, id, amount); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 55 {
		deposit("a-1", int64(i+1))
	}
	store := ts.Host().Store.(entities.JournalStore)
	appendTo := func(id string, w entities.JournalWrite) {
		t.Helper()
		if err := store.Append(ctx, entities.Fence{}, "ledger", id, w); err != nil {
			t.Fatal(err)
		}
	}
	// a-trimmed: 30 deposits of 1, a snapshot after 25, the 25 dropped.
	at := ts.Clock.Now()
	var events []entities.JournalEvent
	for seq := uint64(1); seq <= 30; seq++ {
		events = append(events, entities.JournalEvent{Seq: seq, Name: "deposited", Data: []byte(`{"amount":1}`), At: at})
	}
	appendTo("a-trimmed", entities.JournalWrite{Events: events})
	appendTo("a-trimmed", entities.JournalWrite{Expected: 30, TrimThrough: 25,
		Snapshot: &entities.Snapshot{Seq: 25, Data: []byte(`{"balance":25,"movements":25}`), At: at}})
	appendTo("a-bad", entities.JournalWrite{Events: []entities.JournalEvent{{Seq: 1, Name: "refunded", Data: []byte(`{}`), At: at}}})

	b := newBrowser(t)
	b.signIn(ts.URL)
	b.waitFor("the journals section", visible("journals"))
	lookUp := func(id string) {
		t.Helper()
		b.do("look "+id+" up", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(
			`document.getElementById("es-type").value = "ledger"; document.getElementById("es-id").value = %s`, js(id))),
			chromedp.Click(chromedp.CSS(`#journal-form button[type=submit]`)))
		b.waitText("#jd-title", "ledger · "+id)
	}
	seqs := `JSON.stringify([...document.querySelectorAll("#journal-events tbody tr")].map(r => Number(r.dataset.seq)))`
	waitSeqs := func(from, to int) {
		t.Helper()
		var want []int
		for s := from; s >= to; s-- {
			want = append(want, s)
		}
		b.waitFor(fmt.Sprintf("events %d down to %d", from, to), seqs+" === "+js(js(want)))
	}
	disabled := func(id string) bool {
		return eval[bool](b, `document.getElementById(`+js(id)+`).disabled`)
	}

	lookUp("a-1")
	waitSeqs(55, 36)
	for sel, want := range map[string]string{
		"#jd-seq":                                "55",
		"#jd-deleted":                            "no",
		"#journal-range":                         "Events 36 to 55 of 55",
		`tr[data-seq="55"] td[data-label=Event]`: "deposited",
		`tr[data-seq="55"] td[data-label=Data]`:  `{"amount":55}`,
	} {
		if got := b.text(sel); got != want {
			t.Errorf("%s: %q, want %q", sel, got, want)
		}
	}
	if got := b.text("#jd-snapshot"); !strings.HasPrefix(got, "after event 50, taken ") {
		t.Errorf("snapshot %q, want after event 50", got)
	}
	if got := b.text("#jd-state"); !strings.Contains(got, `"balance": 1275`) {
		t.Errorf("snapshot state %q, want the balance after 50 deposits (1275)", got)
	}
	if !disabled("journal-newer") || disabled("journal-older") {
		t.Error("the newest page: want Newer disabled and Older enabled")
	}
	b.do("older", chromedp.Click(chromedp.ID("journal-older")))
	waitSeqs(35, 16)
	b.do("older", chromedp.Click(chromedp.ID("journal-older")))
	waitSeqs(15, 1)
	if !disabled("journal-older") {
		t.Error("the page of event 1: Older is enabled")
	}
	b.do("newer", chromedp.Click(chromedp.ID("journal-newer")))
	waitSeqs(35, 16)
	deposit("a-1", 1000) // event 56: past the next page
	b.do("newer", chromedp.Click(chromedp.ID("journal-newer")))
	waitSeqs(55, 36)
	b.do("newer", chromedp.Click(chromedp.ID("journal-newer")))
	waitSeqs(56, 37)
	deposit("a-1", 1001) // the newest page follows the journal's end
	waitSeqs(57, 38)

	fits(b, 1440)
	b.do("to the journals", chromedp.Evaluate[chromedp.Void](`document.getElementById("journals").scrollIntoView()`))
	b.screenshot("console-journals-1440.png", false)
	b.do("a phone's width", chromedp.EmulateViewport(320, 720))
	fits(b, 320)
	b.do("back to a desktop's width", chromedp.EmulateViewport(1440, 900))

	lookUp("a-trimmed")
	waitSeqs(30, 26)
	if got, want := b.text("#jd-snapshot"), "after event 25, taken "+at.UTC().Format(time.DateTime)+" UTC"; got != want {
		t.Errorf("snapshot %q, want %q", got, want)
	}
	if !disabled("journal-older") {
		t.Error("events 1 to 25 were dropped: Older is enabled")
	}

	lookUp("a-none")
	b.waitText("#journal-range", "No event")
	b.waitText("#jd-seq", "0")
	lookUp("a-bad")
	b.waitFor("the load error", visible("jd-load-error"))
	if got := b.text("#jd-load-error"); !strings.Contains(got, `unknown event name "refunded"`) {
		t.Errorf("load error %q, want it to name the unknown event", got)
	}
	b.checkNoProblems()
}
