package api_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
)

// TestWriteErrorStatuses pins the error → problem mapping of WriteError.
func TestWriteErrorStatuses(t *testing.T) {
	tests := []struct {
		name   string // case name
		err    error  // the error written
		status int    // expected status
		detail string // expected detail
	}{
		{name: "request error", err: api.InvalidField("id", "bad"), status: 400, detail: "the request is invalid"},
		{name: "error with an HTTP status", err: statusErr(http.StatusConflict), status: 409, detail: "status error"},
		{name: "error with a 5xx HTTP status", err: statusErr(http.StatusBadGateway), status: 502, detail: "Unexpected error"},
		{name: "command error", err: fmt.Errorf("invoke: %w", components.Errorf("too big")), status: 400, detail: "too big"},
		{name: "write conflicts", err: fmt.Errorf("save: %w", entities.ErrConflict), status: 409, detail: "the entity was changed concurrently too many times; retry the request"},
		{name: "request timeout", err: fmt.Errorf("invoke: %w", context.DeadlineExceeded), status: 504, detail: "the request did not finish in time"},
		{name: "cancelled", err: fmt.Errorf("invoke: %w", context.Canceled), status: 503, detail: "the request was cancelled"},
		{name: "anything else", err: errors.New("db password is hunter2"), status: 500, detail: "Unexpected error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/x", nil)
			ctx := api.ContextWithRequestID(r.Context(), "req-1")
			r = r.WithContext(api.ContextWithLogger(ctx, slog.New(slog.DiscardHandler)))
			w := httptest.NewRecorder()
			api.WriteError(w, r, tt.err)
			if w.Code != tt.status || w.Header().Get("Content-Type") != api.ContentTypeProblem {
				t.Fatalf("got %d %s, want %d problem", w.Code, w.Header().Get("Content-Type"), tt.status)
			}
			body := w.Body.String()
			if !strings.Contains(body, `"detail":"`+tt.detail+`"`) || strings.Contains(body, "hunter2") {
				t.Fatalf("body %s, want detail %q and no internals", body, tt.detail)
			}
			if (tt.status >= 500) != strings.Contains(body, `"correlationId":"req-1"`) {
				t.Fatalf("body %s: a correlation id belongs to 5xx only", body)
			}
		})
	}
}

type statusErr int

func (e statusErr) Error() string   { return "status error" }
func (e statusErr) HTTPStatus() int { return int(e) }
