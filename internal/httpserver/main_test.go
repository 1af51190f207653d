package httpserver_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestMain fails the package if a test leaves goroutines behind: every
// service a test starts must stop completely (HTTP, actors, Redis). It
// stops the throwaway Redis the tests started, if any.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(testenv.Servers(m))
}
