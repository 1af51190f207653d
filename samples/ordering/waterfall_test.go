package ordering_test

import (
	"context"
	"fmt"
	"html"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-go/trellis/trellistest"
)

// waterfall holds the spans of several instances' recorders, each span
// labelled with its instance, and renders traces of them as text and as
// an HTML waterfall.
type waterfall struct {
	recorders map[string]*trellistest.Spans
	spans     []*span
}

func newWaterfall(recorders map[string]*trellistest.Spans) *waterfall {
	return &waterfall{recorders: recorders}
}

// collect takes the spans ended so far.
func (w *waterfall) collect() {
	w.spans = w.spans[:0]
	for inst, rec := range w.recorders {
		for _, s := range rec.Ended() {
			w.spans = append(w.spans, &span{ReadOnlySpan: s, instance: inst})
		}
	}
	slices.SortFunc(w.spans, func(a, b *span) int { return a.StartTime().Compare(b.StartTime()) })
}

// find is the first span called name for which ok holds.
func (w *waterfall) find(name string, ok func(*span) bool) *span {
	for _, s := range w.spans {
		if s.Name() == name && ok(s) {
			return s
		}
	}
	return nil
}

// child is the first child of parent called name for which ok (if not
// nil) holds; nil when parent is nil or there is none.
func (w *waterfall) child(parent *span, name string, ok func(*span) bool) *span {
	if parent == nil {
		return nil
	}
	for _, s := range w.children(parent) {
		if s.Name() == name && (ok == nil || ok(s)) {
			return s
		}
	}
	return nil
}

func (w *waterfall) children(parent *span) []*span {
	var out []*span
	for _, s := range w.spans {
		if s.Parent().SpanID() == parent.SpanContext().SpanID() && s.SpanContext().TraceID() == parent.SpanContext().TraceID() {
			out = append(out, s)
		}
	}
	return out
}

func (w *waterfall) parentOf(s *span) *span {
	for _, p := range w.spans {
		if p.SpanContext().SpanID() == s.Parent().SpanID() {
			return p
		}
	}
	return nil
}

// named are the spans called name in trace id.
func (w *waterfall) named(id trace.TraceID, name string) []*span {
	var out []*span
	for _, s := range w.spans {
		if s.SpanContext().TraceID() == id && s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// row is a span in a rendered trace, at its depth.
type row struct {
	*span
	depth int
}

// rows are root's trace, depth first, children in the order they started.
func (w *waterfall) rows(root *span) []row {
	var out []row
	var walk func(s *span, depth int)
	walk = func(s *span, depth int) {
		out = append(out, row{s, depth})
		for _, c := range w.children(s) {
			walk(c, depth+1)
		}
	}
	walk(root, 0)
	return out
}

// caption describes a trace by its root: its trace id and its link.
func (w *waterfall) caption(root *span) string {
	c := "trace " + root.SpanContext().TraceID().String()
	for _, l := range root.Links() {
		name := "span " + l.SpanContext.SpanID().String()
		for _, s := range w.spans {
			if s.SpanContext().SpanID() == l.SpanContext.SpanID() {
				name = s.Name()
			}
		}
		c += fmt.Sprintf(" — linked to %s in trace %s", name, l.SpanContext.TraceID())
	}
	return c
}

func kindName(k trace.SpanKind) string {
	if k == trace.SpanKindInternal {
		return ""
	}
	return k.String()
}

// text renders the traces as indented trees: each span's instance, kind
// and duration, and the offset of its start in the trace.
func (w *waterfall) text(roots []*span) string {
	var b strings.Builder
	for _, root := range roots {
		fmt.Fprintf(&b, "%s\n", w.caption(root))
		for _, r := range w.rows(root) {
			name := strings.Repeat("  ", r.depth) + r.Name()
			fmt.Fprintf(&b, "  %-44s %-9s %-8s +%7.2f ms %7.2f ms\n", name, "instance "+r.instance, kindName(r.SpanKind()),
				ms(r.StartTime().Sub(root.StartTime())), ms(r.EndTime().Sub(r.StartTime())))
		}
	}
	return b.String()
}

// msPlace places a bar's duration: inside a wide bar, else after the
// bar, or before it when the bar ends near the lane's end.
func msPlace(left, width float64) string {
	if width >= 25 {
		return fmt.Sprintf("left:%.2f%%;color:#fff", left)
	}
	if left+width > 85 {
		return fmt.Sprintf("right:%.2f%%;padding-right:4px", 100-left)
	}
	return fmt.Sprintf("left:%.2f%%", left+width)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// html renders the traces as a waterfall page: a row per span, its bar
// placed on the trace's time line and coloured by instance.
func (w *waterfall) html(roots []*span) string {
	var b strings.Builder
	b.WriteString(`<!doctype html><html><head><meta charset="utf-8"><title>The trace of one order</title><style>
body{font:13px/1.4 system-ui,sans-serif;margin:16px;background:#fff;color:#222;width:980px}
h2{font-size:14px;margin:18px 0 6px}
.row{display:flex;align-items:center;height:22px;border-bottom:1px solid #eee}
.name{box-sizing:border-box;width:360px;white-space:nowrap;overflow:hidden;font-family:ui-monospace,monospace;font-size:12px}
.inst{width:70px;font-size:11px}
.lane{position:relative;flex:1;height:14px;background:#fafafa}
.bar{position:absolute;top:0;height:14px;border-radius:2px}
.ms{position:absolute;top:0;font-size:10px;padding-left:4px;white-space:nowrap;color:#333}
.A{background:#2b6cb0}.B{background:#c05621}
.legend span{display:inline-block;padding:1px 6px;margin-right:8px;color:#fff;border-radius:2px}
.note{color:#555;font-size:12px}
</style></head><body>
<div class="legend"><span class="A">instance A (took the request)</span><span class="B">instance B (owns the order)</span></div>
`)
	for i, root := range roots {
		title := "Placing the order"
		if i > 0 {
			title = "Its expiry, a minute later"
		}
		fmt.Fprintf(&b, "<h2>%s</h2><div class=\"note\">%s</div>\n", html.EscapeString(title), html.EscapeString(w.caption(root)))
		rows := w.rows(root)
		start, end := root.StartTime(), root.EndTime()
		for _, r := range rows {
			if r.EndTime().After(end) {
				end = r.EndTime()
			}
		}
		total := float64(end.Sub(start))
		for _, r := range rows {
			left := 100 * float64(r.StartTime().Sub(start)) / total
			width := max(100*float64(r.EndTime().Sub(r.StartTime()))/total, 0.4)
			fmt.Fprintf(&b, `<div class="row"><div class="name" style="padding-left:%dpx">%s</div><div class="inst">%s %s</div>`+
				`<div class="lane"><div class="bar %s" style="left:%.2f%%;width:%.2f%%"></div>`+
				`<div class="ms" style="%s">%.2f ms</div></div></div>`+"\n",
				8+16*r.depth, html.EscapeString(r.Name()), r.instance, kindName(r.SpanKind()), r.instance, left, width,
				msPlace(left, width), ms(r.EndTime().Sub(r.StartTime())))
		}
	}
	b.WriteString("</body></html>\n")
	return b.String()
}

// screenshot opens page in a headless Chromium and writes a PNG of it to
// out. Without Chromium it skips, as the console's browser tests do (and
// fails under scripts/test.sh, which installs it).
func screenshot(t *testing.T, page, out string) {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		const how = "the picture needs Chromium: run with `bash scripts/test.sh`, or apt-get install -y chromium"
		if os.Getenv("TRELLIS_TEST_REQUIRE_BROWSER") != "" {
			t.Fatal(how)
		}
		t.Skip(how)
	}
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(path), chromedp.Headless, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1012, 600),
		chromedp.Flag("disable-dev-shm-usage", true)}
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	tab, cancelTab := chromedp.NewContext(alloc)
	defer cancelTab()
	if err := chromedp.Do(tab, chromedp.Navigate("file://"+page)); err != nil {
		t.Fatalf("open the waterfall: %v", err)
	}
	rows, err := chromedp.Run(tab, chromedp.Evaluate[int](`document.querySelectorAll(".row").length`))
	if err != nil {
		t.Fatalf("count the waterfall's rows: %v", err)
	}
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot the waterfall: %v", err)
	}
	if rows == 0 || len(png) == 0 {
		t.Fatalf("the page shows %d rows, the screenshot has %d bytes", rows, len(png))
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("the waterfall (%d rows): %s", rows, out)
}
