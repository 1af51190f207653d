package workpulling_test

import (
	"testing"

	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
)

// TestMain fails the package if a test leaves a goroutine behind, and runs
// the producer process of the kill -9 tests (see deliverytest.Main).
func TestMain(m *testing.M) { deliverytest.Main(m) }
