package console_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestMain fails the package if a test leaves goroutines behind: every
// service, scheduler and browser a test starts must stop completely.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(testenv.Servers(m))
}
