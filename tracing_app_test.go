package trellis_test

import (
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/trellistest"
)

// noteEntity is the entity of TestTraceAppSpans: its command opens a
// span of the application's own, from the context it is given.
var (
	noteEntity = entities.Define("trace-note", func(string) int { return 0 })
	noteTouch  = entities.Command(noteEntity, "touch",
		func(ctx *entities.Ctx[int, int], n int, _ components.Done) entities.Effect[int, int] {
			_, span := noteTracer.Start(ctx.Context(), "app: touch")
			defer span.End()
			return ctx.UpdateState(n + 1).ThenReply(n + 1)
		})
	// noteTracer is replaced by the test's setup.
	noteTracer trace.Tracer = noop.NewTracerProvider().Tracer("")
)

// TestTraceAppSpans: the span is in the context an endpoint and an
// entity command get, so an application's own spans (made with
// Host.Tracing, as docs/observability.md shows) sit under the platform's.
func TestTraceAppSpans(t *testing.T) {
	spans := trellistest.NewSpans(t)
	setup := func(h *trellis.Host, r chi.Router) error {
		noteTracer = h.Tracing.Tracer("trace-app-test")
		if _, err := noteEntity.Start(h.Entities()); err != nil {
			return err
		}
		r.Post("/notes/{id}", func(w http.ResponseWriter, r *http.Request) {
			ctx, span := noteTracer.Start(r.Context(), "app: endpoint")
			defer span.End()
			n, err := noteTouch.Invoke(ctx, h.Client, chi.URLParam(r, "id"), components.Done{})
			if err != nil {
				api.WriteError(w, r, err)
				return
			}
			api.WriteJSON(w, r, http.StatusOK, n)
		})
		return nil
	}
	ts := trellistest.Start(t, setup, spans.Option())
	if resp := ts.Post(t, "/notes/a", nil); resp.Status != http.StatusOK {
		t.Fatalf("POST /notes/a: %d %s", resp.Status, resp.Body)
	}
	req := spans.Wait(t, "POST /notes/{id}")
	endpoint := spans.Child(t, req, "app: endpoint")
	call := spans.Child(t, endpoint, "call trace-note.touch")
	spans.Child(t, call, "app: touch")
}
