package trellis_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/trellis-go/trellis/trellistest"
)

// TestMain fails the package if a test leaves goroutines behind: every
// service a test starts must stop completely (HTTP, actors, Redis).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(trellistest.Servers(m))
}
