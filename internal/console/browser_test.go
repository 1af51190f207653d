package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/trellis-go/trellis/internal/console"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/timers"
	"github.com/trellis-go/trellis/trellistest"
)

// screenshotDir is where TestConsoleInBrowser writes its screenshots;
// by default the test's artifact directory, which go test keeps with
// -artifacts (under -outputdir). The README's screenshot is made with
//
//	go test ./internal/console -run TestConsoleInBrowser/memory -console.screenshots /tmp
//	cp /tmp/console-memory-1440.png docs/console.png
var screenshotDir = flag.String("console.screenshots", "",
	"directory for the browser tests' screenshots (default: the test's artifact directory)")

// waitLimit bounds every wait on the page.
const waitLimit = 15 * time.Second

// browser is one tab of a headless Chromium of the test's own.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	problems []string // uncaught exceptions, and errors logged other than failed requests
}

// newBrowser starts Chromium (Debian's chromium package) headless, with a
// fresh profile, and opens a tab. When Chromium is missing it fails the
// test under the test command (which sets requireBrowserEnv and installs
// Chromium), and skips it under a plain go test, saying how to run it.
// The browser is stopped at cleanup.
// requireBrowserEnv, set by the test command, makes a missing Chromium a
// failure rather than a skip.
const requireBrowserEnv = "TRELLIS_TEST_REQUIRE_BROWSER"

func newBrowser(t *testing.T) *browser {
	t.Helper()
	testenv.Long(t)
	path, err := exec.LookPath("chromium")
	if err != nil {
		const how = "this test needs Chromium: run it with `bash scripts/test.sh`, which installs it, " +
			"or install Debian's package yourself (apt-get install -y chromium)"
		if os.Getenv(requireBrowserEnv) != "" {
			t.Fatal(how)
		}
		t.Skip(how)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	}
	if os.Geteuid() == 0 {
		// Chromium refuses to run as root with its sandbox.
		opts = append(opts, chromedp.NoSandbox)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tabCtx, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		if err := chromedp.Cancel(tabCtx); err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("close the browser: %v", err)
		}
		cancelTab()
		cancelAlloc()
		cancel()
	})
	b := &browser{t: t, ctx: tabCtx}
	if err := chromedp.Listen(tabCtx, b.record); err != nil {
		t.Fatalf("start Chromium (%s): %v", path, err)
	}
	return b
}

// record keeps what the page should never produce: an uncaught exception,
// or an error in the console (a blocked resource or a policy violation
// included). A failed request is not one: the wrong token's 401 is
// expected.
func (b *browser) record(ev any) {
	var problem string
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		problem = "exception: " + ev.ExceptionDetails.Text
		if ev.ExceptionDetails.Exception != nil {
			problem += " " + ev.ExceptionDetails.Exception.Description
		}
	case *log.EventEntryAdded:
		if ev.Entry.Level == log.EntryLevelError && ev.Entry.Source != log.EntrySourceNetwork {
			problem = fmt.Sprintf("console %s error: %s (%s)", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL)
		}
	}
	if problem != "" {
		b.mu.Lock()
		b.problems = append(b.problems, problem)
		b.mu.Unlock()
	}
}

// checkNoProblems fails the test for each problem the page had.
func (b *browser) checkNoProblems() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		b.t.Errorf("the page had a problem: %s", p)
	}
}

// do runs actions in the tab, failing the test on an error.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor waits until the JavaScript expression cond is true, or fails
// the test with what, and what the page shows.
func (b *browser) waitFor(what, cond string) {
	b.t.Helper()
	_, err := chromedp.Run(b.ctx, chromedp.Poll[bool](cond,
		chromedp.WithPollingTimeout(waitLimit), chromedp.WithPollingInterval(20*time.Millisecond)))
	if err != nil {
		shown, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body.innerText`))
		b.t.Fatalf("%s: not within %v (%v); the page shows:\n%s", what, waitLimit, err, shown)
	}
}

// js is s as a JavaScript literal.
func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// text is the text of the element sel selects ("" when there is none).
func (b *browser) text(sel string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`(document.querySelector(%s) || {}).textContent || ""`, js(sel)))
}

// waitText waits until the element sel selects has the text want.
func (b *browser) waitText(sel, want string) {
	b.t.Helper()
	b.waitFor(fmt.Sprintf("%s shows %q", sel, want),
		fmt.Sprintf(`(document.querySelector(%s) || {}).textContent === %s`, js(sel), js(want)))
}

// signIn opens the console of the service at base at 1440 px and signs in
// with the admin token.
func (b *browser) signIn(base string) {
	b.t.Helper()
	b.do("open the console", chromedp.EmulateViewport(1440, 900), chromedp.Navigate(base+"/admin/console/"))
	b.waitFor("the sign-in form", visible("login-view"))
	b.do("sign in", chromedp.SendKeys(chromedp.ID("token"), fixture.AdminToken), chromedp.Click(chromedp.CSS(`#login button[type=submit]`)))
}

// visible is a JavaScript condition: the element with id shows.
func visible(id string) string {
	return fmt.Sprintf(`(e => !!e && !e.hidden && e.getClientRects().length > 0)(document.getElementById(%s))`, js(id))
}

// rowsExpr is the names of the timers listed, as a JSON array.
const rowsExpr = `JSON.stringify([...document.querySelectorAll("#timers tbody tr")].map(r => r.dataset.name))`

// waitRows waits until the list shows exactly the timers want, in order.
func (b *browser) waitRows(want ...string) {
	b.t.Helper()
	if want == nil {
		want = []string{}
	}
	b.waitFor(fmt.Sprintf("the list shows %v", want), rowsExpr+" === "+js(js(want)))
}

// orders are the names of order-expiration-o-<from> to -<to>.
func orders(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("order-expiration-o-%02d", i))
	}
	return out
}

// screenshot writes a PNG of the tab as name: of the whole page, or of
// what the viewport shows.
func (b *browser) screenshot(name string, wholePage bool) {
	b.t.Helper()
	shot := chromedp.CaptureScreenshot()
	if wholePage {
		shot = chromedp.FullScreenshot(100)
	}
	png, err := chromedp.Run(b.ctx, shot)
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := *screenshotDir
	if dir == "" {
		dir = b.t.ArtifactDir()
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", path)
}

// TestConsoleInBrowser drives the console in a real headless Chromium
// against a real service over loopback: a wrong token shows an error and
// no data; the right one shows the stats and the chart; the list filters
// and pages; a timer opens and is deleted after a confirmation, and the
// stats follow; a timer created meanwhile appears without a reload; the
// page fits 1440 and 320 px wide; signing out forgets the token.
func TestConsoleInBrowser(t *testing.T) {
	for _, sc := range fixture.Stores {
		t.Run(sc.Name, func(t *testing.T) { walkConsole(t, sc.Name, sc.Opts(t)...) })
	}
}

// walkConsole is TestConsoleInBrowser on one store; its screenshots are
// named console-<store>-<width>.png.
func walkConsole(t *testing.T, store string, opts ...trellistest.Option) {
	ts := fixture.Start(t, fixture.AdminToken, opts...)
	createTimers(t, ts)
	b := newBrowser(t)
	home := ts.URL + "/admin/console/"
	// step runs one step of the walk as a subtest; once one failed, the
	// page is not where the next expects it, so the rest are skipped.
	step := func(name string, f func(t *testing.T)) {
		if t.Failed() {
			return
		}
		t.Run(name, func(t *testing.T) {
			b.t = t
			f(t)
		})
		b.t = t
	}

	b.do("open the console", chromedp.EmulateViewport(1440, 900), chromedp.Navigate(ts.URL+"/admin/console"))
	b.waitFor("the sign-in form", visible("login-view"))
	if got := eval[string](b, `location.href`); got != home {
		t.Errorf("the console is at %s, want %s", got, home)
	}

	step("wrong token", func(t *testing.T) {
		b.do("sign in with a wrong token",
			chromedp.SendKeys(chromedp.ID("token"), "not-the-admin-token-0000000"),
			chromedp.Click(chromedp.CSS(`#login button[type=submit]`)))
		b.waitFor("the sign-in error", visible("login-error"))
		if got := b.text("#login-error"); !strings.Contains(got, "not the admin token") {
			t.Errorf("sign-in error %q, want it to say the token is not the admin token", got)
		}
		noData(b)
	})

	step("stats and chart", func(t *testing.T) {
		b.do("sign in", chromedp.SendKeys(chromedp.ID("token"), fixture.AdminToken), chromedp.Click(chromedp.CSS(`#login button[type=submit]`)))
		b.waitFor("the console", visible("console-view"))
		b.waitText("#stat-active .value", "28")
		for sel, want := range map[string]string{
			"#stat-failing .value": "2", "#stat-due .value": "3", "#stat-limit .value": "50,000",
		} {
			if got := b.text(sel); got != want {
				t.Errorf("%s shows %q, want %q", sel, got, want)
			}
		}
		b.waitText("#stat-store .value", "ok")
		b.waitFor("a refresh done", `document.getElementById("updated").textContent !== ""`)
		// On Redis the instance is a cluster of one (the default); the
		// embedded store is never part of a cluster.
		if clustered := store == "redis"; eval[bool](b, visible("cluster")) != clustered {
			t.Errorf("the cluster section shows: %v; want %v (store %s)", !clustered, clustered, store)
		}
		b.waitFor("the chart of the fixture", `JSON.stringify([...document.querySelectorAll("#chart-svg rect")].map(r => +r.dataset.count)) === `+js(js(fixtureChart)))
		if got := b.text("#chart-summary"); !strings.HasPrefix(got, "27 due within the hour, 0 of them already due.") {
			t.Errorf("chart summary %q", got)
		}
		if got := eval[string](b, `location.href`); got != home {
			t.Errorf("after signing in the address is %s, want %s: the token must never be in a URL", got, home)
		}
		if got := eval[string](b, `sessionStorage.getItem("trellis.console.adminToken")`); got != fixture.AdminToken {
			t.Errorf("session storage holds %q, want the token", got)
		}
	})

	step("filter", func(t *testing.T) {
		// Run order: the payments are due again at t0+5s, before the orders.
		b.waitRows(append([]string{"payment-retry-1", "payment-retry-2"}, orders(1, 23)...)...)
		apply := chromedp.Click(chromedp.CSS(`#filters button[type=submit]`))

		b.do("filter by name", chromedp.SetValue(chromedp.ID("f-name"), "payment"), apply)
		b.waitRows("payment-retry-1", "payment-retry-2")
		if got := b.text(`tr[data-name="payment-retry-1"] .badge`); got != "failing" {
			t.Errorf("payment-retry-1's status %q, want failing", got)
		}

		b.do("reset", chromedp.Click(chromedp.ID("f-reset")))
		b.waitRows(append([]string{"payment-retry-1", "payment-retry-2"}, orders(1, 23)...)...)
		b.do("failing only", chromedp.Click(chromedp.ID("f-failing")))
		b.waitRows("payment-retry-1", "payment-retry-2")
		b.do("all again", chromedp.Click(chromedp.ID("f-failing")))
		b.waitRows(append([]string{"payment-retry-1", "payment-retry-2"}, orders(1, 23)...)...)

		b.do("by method", chromedp.SetValue(chromedp.ID("f-method"), "chargePayment"), apply)
		b.waitRows("payment-retry-1", "payment-retry-2")
		b.do("and by component", chromedp.SetValue(chromedp.ID("f-component"), fixture.ActionID), apply)
		b.waitRows("payment-retry-1", "payment-retry-2")
		b.do("and by an entity no call addresses", chromedp.SetValue(chromedp.ID("f-entity"), "c-7"), apply)
		b.waitRows()
		b.do("reset the call filters", chromedp.Click(chromedp.ID("f-reset")))
		b.waitRows(append([]string{"payment-retry-1", "payment-retry-2"}, orders(1, 23)...)...)

		// Now is t0+2s: within 150 s are the payments, o-01 and o-02.
		b.do("upcoming", chromedp.SetValue(chromedp.ID("f-upcoming"), "150s"), apply)
		b.waitRows("payment-retry-1", "payment-retry-2", "order-expiration-o-01", "order-expiration-o-02")

		b.do("invalid upcoming", chromedp.SetValue(chromedp.ID("f-upcoming"), "soon"), apply)
		b.waitFor("the list's error", visible("list-error"))
		if got := b.text("#list-error"); !strings.Contains(got, "upcoming must be a Go duration") {
			t.Errorf("list error %q, want it to name upcoming and say what it must be", got)
		}
		b.waitRows()
	})

	step("page", func(t *testing.T) {
		b.do("ten orders a page",
			chromedp.Click(chromedp.ID("f-reset")),
			chromedp.SetValue(chromedp.ID("f-name"), "order-expiration"),
			chromedp.SetValue(chromedp.ID("f-limit"), "10"),
			chromedp.Click(chromedp.CSS(`#filters button[type=submit]`)))
		b.waitRows(orders(1, 10)...)
		if !eval[bool](b, `document.getElementById("page-prev").disabled`) {
			t.Error("Previous is enabled on the first page")
		}
		b.do("next", chromedp.Click(chromedp.ID("page-next")))
		b.waitRows(orders(11, 20)...)
		b.waitText("#page-no", "Page 2")
		b.do("next", chromedp.Click(chromedp.ID("page-next")))
		b.waitRows(orders(21, 25)...)
		b.waitFor("Next disabled on the last page", `document.getElementById("page-next").disabled`)
		b.do("previous", chromedp.Click(chromedp.ID("page-prev")))
		b.waitRows(orders(11, 20)...)
		b.waitText("#page-no", "Page 2")
	})

	step("open and delete", func(t *testing.T) {
		const name = "order-expiration-o-12"
		b.do("open "+name, chromedp.Click(chromedp.CSS(`tr[data-name="`+name+`"] button`)))
		b.waitText("#d-method", "expireOrder")
		for sel, want := range map[string]string{
			"#detail-name": name, "#d-component": fixture.ActionID, "#d-entity": "—",
			"#d-last-error": "—", "#d-last-attempt": "—",
		} {
			if got := b.text(sel); got != want {
				t.Errorf("%s shows %q, want %q", sel, got, want)
			}
		}
		if got := b.text("#d-payload"); !strings.Contains(got, `"order": "o-12"`) {
			t.Errorf("payload %q, want the call's argument", got)
		}
		if got := b.text("#d-attempts"); !strings.HasPrefix(got, "0 ") {
			t.Errorf("attempts %q, want 0", got)
		}
		for _, sel := range []string{"#d-due", "#d-created"} {
			if got := b.text(sel); !strings.Contains(got, " UTC (") {
				t.Errorf("%s shows %q, want a UTC time and how far it is", sel, got)
			}
		}

		// Cancel first: nothing is deleted.
		b.do("delete, then cancel", chromedp.Click(chromedp.ID("detail-delete")))
		b.waitFor("the confirmation", `document.getElementById("confirm").open`)
		if got := b.text("#confirm-name"); got != name {
			t.Errorf("the confirmation names %q, want %q", got, name)
		}
		b.do("cancel", chromedp.Click(chromedp.ID("confirm-cancel")))
		b.waitFor("the confirmation closed", `!document.getElementById("confirm").open`)
		if _, err := ts.Service.Host().Timers.Get(context.Background(), name); err != nil {
			t.Fatalf("after cancel: %v", err)
		}

		b.do("delete, and confirm", chromedp.Click(chromedp.ID("detail-delete")))
		b.waitFor("the confirmation", `document.getElementById("confirm").open`)
		b.do("confirm", chromedp.Click(chromedp.ID("confirm-delete")))
		b.waitText("#notice", "Deleted timer "+name+".")
		b.waitFor("the detail closed", `document.getElementById("detail").hidden`)
		b.waitText("#stat-active .value", "27")
		b.waitRows(append(orders(11, 11), orders(13, 21)...)...)
		if _, err := ts.Service.Host().Timers.Get(context.Background(), name); !errors.Is(err, timers.ErrNotFound) {
			t.Fatalf("after delete, Get %s: %v, want ErrNotFound", name, err)
		}
	})

	step("live refresh", func(t *testing.T) {
		// A mark on the page's window: a reload would lose it.
		b.do("refresh every second", chromedp.Evaluate[chromedp.Void](
			`window.consoleTestMark = 1; (s => { s.value = "1000"; s.dispatchEvent(new Event("change")); })(document.getElementById("refresh"))`))
		create(t, ts, "order-expiration-o-00", 30*time.Second, fixture.Call(t, false, "o-00"))
		b.waitText("#stat-active .value", "28")
		b.waitFor("the chart's first bar counts the new timer", `+document.querySelectorAll("#chart-svg rect")[1].dataset.count === 8`)
		if !eval[bool](b, `window.consoleTestMark === 1`) {
			t.Error("the page was reloaded")
		}
	})

	step("1440 px", func(t *testing.T) {
		b.do("all timers", chromedp.Click(chromedp.ID("f-reset")))
		b.waitRows(append([]string{"payment-retry-1", "payment-retry-2", "order-expiration-o-00"}, append(orders(1, 11), orders(13, 23)...)...)...)
		b.do("open a failing timer", chromedp.Click(chromedp.CSS(`tr[data-name="payment-retry-1"] button`)))
		b.waitFor("the timer's last error", `document.getElementById("d-last-error").textContent.endsWith("payment provider refused order payment-retry-1")`)
		fits(b, 1440)
		b.screenshot("console-"+store+"-1440.png", true)
	})

	step("320 px", func(t *testing.T) {
		b.do("a phone's width", chromedp.EmulateViewport(320, 720))
		fits(b, 320)
		if got := eval[string](b, `getComputedStyle(document.querySelector("#timers thead")).display`); got != "none" {
			t.Errorf("at 320 px the table header shows (display %q): rows should be cards", got)
		}
		b.do("to the top", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
		b.screenshot("console-"+store+"-320.png", false)
		b.do("open a timer", chromedp.Click(chromedp.CSS(`tr[data-name="payment-retry-2"] button`)))
		// Within a pixel: scrolling is to whole pixels, layout is not.
		b.waitFor("the timer in view", `(r => r.top > -1 && r.top < window.innerHeight)(document.getElementById("detail").getBoundingClientRect())`)
		b.waitText("#detail-name", "payment-retry-2")
		fits(b, 320)
		b.screenshot("console-"+store+"-320-timer.png", false)
		b.do("back to a desktop's width", chromedp.EmulateViewport(1440, 900))
	})

	if store == "redis" {
		step("wiped store", func(t *testing.T) {
			// What FLUSHALL would do to this service, without touching the
			// other tests' keys on the shared Redis.
			marker := console.WipeMarkers(t, testenv.Redis(t), ts.Service.Host().Config.RedisPrefix)
			// The scheduler looks at the marker at its next claim, at the
			// latest IdleCheck (1 s) later on the fake clock.
			ts.Clock.Advance(time.Second)
			b.waitText("#stat-store .value", "wiped")
			if got := b.text("#stat-store .sub"); !strings.Contains(got, marker) {
				t.Errorf("the store tile says %q, want why (the marker %s disappeared)", got, marker)
			}
			if !eval[bool](b, `document.getElementById("stat-store").classList.contains("bad")`) {
				t.Error("a wiped store is not shown as bad")
			}
		})
	}

	step("sign out", func(t *testing.T) {
		b.do("sign out", chromedp.Click(chromedp.ID("sign-out")))
		b.waitFor("the sign-in form", visible("login-view"))
		noData(b)
	})

	b.checkNoProblems()
	if strings.Contains(ts.Logs(), fixture.AdminToken) {
		t.Error("the service log holds the admin token")
	}
}

// noData checks that the page shows the sign-in form and no data, and
// keeps no token.
func noData(b *browser) {
	b.t.Helper()
	if eval[bool](b, `!document.getElementById("console-view").hidden`) {
		b.t.Error("the console's data view shows without a valid token")
	}
	if n := eval[int](b, `document.querySelectorAll("#timers tbody tr, #chart-svg rect").length`); n != 0 {
		b.t.Errorf("%d rows and bars are in the page without a valid token", n)
	}
	if shown := eval[string](b, `document.body.innerText`); strings.Contains(shown, "order-expiration") || strings.Contains(shown, "payment-retry") {
		b.t.Errorf("the page shows timers without a valid token:\n%s", shown)
	}
	if got := eval[*string](b, `sessionStorage.getItem("trellis.console.adminToken")`); got != nil {
		b.t.Errorf("session storage holds a token: %q", *got)
	}
}

// fits checks that nothing is wider than the viewport of width px: no
// horizontal scrolling.
func fits(b *browser, width int) {
	b.t.Helper()
	b.waitFor(fmt.Sprintf("the viewport is %d px wide", width), fmt.Sprintf(`window.innerWidth === %d`, width))
	if w := eval[int](b, `document.documentElement.scrollWidth`); w > width {
		b.t.Errorf("the page is %d px wide in a %d px viewport", w, width)
	}
}
