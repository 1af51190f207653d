package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/store"
	"github.com/trellis-go/trellis/timers"
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
		{name: "command error: invalid", err: fmt.Errorf("invoke: %w", components.NewError(components.Invalid, "no such size")), status: 422, detail: "no such size"},
		{name: "command error: not found", err: fmt.Errorf("invoke: %w", components.NewError(components.NotFound, "no cart c-1")), status: 404, detail: "no cart c-1"},
		{name: "command error: conflict", err: fmt.Errorf("invoke: %w", components.NewError(components.Conflict, "checked out")), status: 409, detail: "checked out"},
		{name: "write conflicts", err: fmt.Errorf("save: %w", entities.ErrConflict), status: 409, detail: "the entity was changed concurrently too many times; retry the request"},
		{name: "request timeout", err: fmt.Errorf("invoke: %w", context.DeadlineExceeded), status: 504, detail: "the request did not finish in time"},
		{name: "cancelled", err: fmt.Errorf("invoke: %w", context.Canceled), status: 503, detail: "the request was cancelled"},
		{name: "store refused the connection", err: fmt.Errorf("load: %w", store.Classify(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})), status: 503, detail: api.StoreUnavailableDetail},
		{name: "store connection dropped", err: fmt.Errorf("save: %w", store.Classify(io.EOF)), status: 503, detail: api.StoreUnavailableDetail},
		{name: "store client closed", err: fmt.Errorf("list: %w", store.Classify(redis.ErrClosed)), status: 503, detail: api.StoreUnavailableDetail},
		{name: "store pool exhausted", err: fmt.Errorf("get: %w", store.Classify(redis.ErrPoolTimeout)), status: 503, detail: api.StoreUnavailableDetail},
		{name: "store unavailable", err: fmt.Errorf("get: %w", components.ErrUnavailable), status: 503, detail: api.StoreUnavailableDetail},
		{name: "entity owner unreachable", err: fmt.Errorf("forward: %w: %w", components.ErrOwnerUnreachable, components.ErrUnavailable), status: 503, detail: api.OwnerUnreachableDetail},
		{name: "entity's shard kept moving", err: fmt.Errorf("route: %w: %w", components.ErrShardMoving, components.ErrUnavailable), status: 503, detail: api.ShardMovingDetail},
		{name: "write's reply lost", err: fmt.Errorf("save: %w", store.ClassifyWrite(io.EOF)), status: 504, detail: api.OutcomeUnknownDetail},
		{name: "write refused before sending", err: fmt.Errorf("save: %w", store.ClassifyWrite(redis.ErrPoolTimeout)), status: 503, detail: api.StoreUnavailableDetail},
		{name: "outcome unknown", err: fmt.Errorf("save: %w", components.ErrOutcomeUnknown), status: 504, detail: api.OutcomeUnknownDetail},
		{name: "active-timers limit", err: fmt.Errorf("create: %w", &timers.LimitError{Limit: timers.LimitActive, Value: 50000, Max: 50000}), status: 503,
			detail: "active timers limit exceeded: 50000 timers are active, the limit is 50000 (replacing an existing name does not count)"},
		{name: "timer name limit", err: fmt.Errorf("create: %w", &timers.LimitError{Limit: timers.LimitName, Value: 300, Max: 256}), status: 400,
			detail: "name length limit exceeded: the name is 300 bytes, the limit is 256"},
		{name: "a store error that is not unavailability", err: fmt.Errorf("get: %w", store.Classify(redis.Nil)), status: 500, detail: "Unexpected error"},
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
			retry := tt.status == http.StatusServiceUnavailable || tt.name == "write conflicts"
			if retry != (w.Header().Get("Retry-After") != "") {
				t.Fatalf("Retry-After %q on a %d: it belongs to every 503 and write conflicts' 409, and only to them",
					w.Header().Get("Retry-After"), tt.status)
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

// TestProblemListsBoundedErrors sends a body with 90,000 unknown keys
// through Decode and WriteError: the problem lists MaxListedErrors of them
// and says how many more there were, and stays small.
func TestProblemListsBoundedErrors(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"customer":"ann","items":[{"sku":"apple","qty":1}],"coupon":null`)
	for i := range 90000 {
		fmt.Fprintf(&b, `,"k%d":1`, i)
	}
	b.WriteString("}")
	r := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(b.String()))
	r = r.WithContext(api.ContextWithLogger(r.Context(), slog.New(slog.DiscardHandler)))
	var o order
	err := api.Decode(r, &o)
	w := httptest.NewRecorder()
	api.WriteError(w, r, err)
	var p api.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("decode the problem: %v", err)
	}
	switch {
	case w.Code != http.StatusBadRequest:
		t.Fatalf("status %d, want 400", w.Code)
	case len(p.Errors) != api.MaxListedErrors:
		t.Fatalf("%d errors listed, want %d", len(p.Errors), api.MaxListedErrors)
	case !strings.Contains(p.Detail, fmt.Sprintf("(%d more invalid fields not listed)", 90000-api.MaxListedErrors)):
		t.Fatalf("detail %q does not count the rest", p.Detail)
	case w.Body.Len() > 4<<10:
		t.Fatalf("the problem is %d bytes, want at most 4 KiB", w.Body.Len())
	case len(err.Error()) > 4<<10:
		t.Fatalf("the error's text is %d bytes, want at most 4 KiB: it goes to logs", len(err.Error()))
	}
}
