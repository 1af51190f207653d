package idempotency_test

import (
	"os"
	"testing"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestMain stops the throwaway Redis the tests started, if any.
func TestMain(m *testing.M) { os.Exit(testenv.Servers(m).Run()) }
