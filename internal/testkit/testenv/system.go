package testenv

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/trellis-go/trellis/runtime"
)

// System is a runtime system named name, with opts, that logs nowhere
// (an option may give it a logger) and is shut down when tb ends; a
// shutdown that fails or takes over 5 s fails tb.
func System(tb testing.TB, name string, opts ...runtime.Option) *runtime.System {
	tb.Helper()
	opts = append([]runtime.Option{runtime.WithLogger(slog.New(slog.DiscardHandler))}, opts...)
	sys := runtime.NewSystem(name, opts...)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := sys.Shutdown(ctx); err != nil {
			tb.Errorf("shutdown: %v", err)
		}
	})
	return sys
}
