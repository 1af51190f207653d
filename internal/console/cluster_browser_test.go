package console_test

import (
	"context"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	adminapi "github.com/trellis-go/trellis/api/admin"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
)

// TestConsoleClusterInBrowser drives the console of one of three
// instances of a cluster in a real headless Chromium: the cluster section
// lists the three members (this instance marked, each with a recent
// heartbeat and a share of the shards within 10 % of even) and maps the
// 256 shards, each in its owner's colour; it fits 1440 and 320 px; when
// an instance stops gracefully, the page shows two members without a
// reload.
func TestConsoleClusterInBrowser(t *testing.T) {
	instances := fixture.StartCluster(t, 3)
	ts := instances[1]
	var view adminapi.Cluster
	fixture.Admin(t, ts, http.MethodGet, "/admin/cluster").JSON(t, &view)
	b := newBrowser(t)

	b.signIn(ts.URL)
	b.waitFor("the cluster section", visible("cluster"))
	b.waitFor("three members", `document.querySelectorAll("#members tbody tr").length === 3`)
	b.waitFor("256 shards, all served", `(c => c.length === 256 && c.every(e => e.dataset.state === "served"))([...document.querySelectorAll("#shard-map .shard")])`)

	if got := eval[string](b, `(document.querySelector("#members tr.self") || {dataset: {}}).dataset.id || ""`); got != view.Self {
		t.Errorf("the row marked as this instance is %q, want %q", got, view.Self)
	}
	type row struct {
		ID, Status, Beat, Swatch string
		Shards, Mapped           int
		MapColoured              bool
	}
	rows := eval[[]row](b, `[...document.querySelectorAll("#members tbody tr")].map(tr => {
		const swatch = [...tr.querySelector(".swatch").classList].find(c => /^o\d$/.test(c));
		const cells = [...document.querySelectorAll("#shard-map .shard")].filter(e => e.dataset.owner === tr.dataset.id);
		return {ID: tr.dataset.id, Status: tr.querySelector(".badge").textContent,
			Beat: tr.querySelector(".heartbeat").textContent, Swatch: swatch,
			Shards: +tr.querySelector("td[data-label=Shards]").textContent, Mapped: cells.length,
			MapColoured: cells.every(e => e.classList.contains(swatch))};
	})`)
	beat := regexp.MustCompile(`^\d+\.\d s ago$`)
	colours := map[string]bool{}
	for _, r := range rows {
		colours[r.Swatch] = true
		if r.Status != "alive" || r.Shards < 77 || r.Shards > 93 || r.Mapped != r.Shards || !r.MapColoured || !beat.MatchString(r.Beat) {
			t.Errorf("member row %+v: want alive, 77 to 93 shards (85.3 ± 10 %%) as many in the map in its colour, and a heartbeat age", r)
		}
	}
	if len(colours) != 3 {
		t.Errorf("the members' colours %v, want three", colours)
	}
	if got := b.text("#cluster-summary"); got != "3 members alive; 256 of 256 shards owned (256 served, 0 handing over), 0 with a lapsed owner, 0 unowned." {
		t.Errorf("cluster summary %q", got)
	}
	fits(b, 1440)
	b.screenshot("console-cluster-1440.png", true)
	b.do("a phone's width", chromedp.EmulateViewport(320, 720))
	fits(b, 320)
	b.do("to the cluster", chromedp.Evaluate[chromedp.Void](`document.getElementById("cluster").scrollIntoView()`))
	b.screenshot("console-cluster-320.png", false)
	b.do("back to a desktop's width", chromedp.EmulateViewport(1440, 900))

	b.do("refresh every second", chromedp.Evaluate[chromedp.Void](
		`(s => { s.value = "1000"; s.dispatchEvent(new Event("change")); })(document.getElementById("refresh"))`))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := instances[2].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	b.waitFor("two members", `document.querySelectorAll("#members tbody tr").length === 2`)
	b.checkNoProblems()
}
