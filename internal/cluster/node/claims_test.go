package node

import (
	"context"
	"testing"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/runtime"
)

// TestHolderGone: a claim's holder is gone once no live member has its
// id: a member that lives is not, one that never was is, and one that
// crashed is once its lease lapsed.
func TestHolderGone(t *testing.T) {
	cfg := testConfig(t, testenv.Redis(t))
	n, err := Join(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = n.Shutdown(ctx)
	})
	other := cfg
	other.Shards, other.Registry = NewShards(), components.NewRegistry()
	other.System = runtime.NewSystem("node-test-other")
	t.Cleanup(func() { _ = other.System.Shutdown(context.Background()) })
	o, err := Join(other)
	if err != nil {
		t.Fatal(err)
	}
	if n.ClaimHolder() == o.ClaimHolder() {
		t.Fatal("two nodes have the same claim holder name")
	}
	if n.HolderGone(t.Context(), o.ClaimHolder()) {
		t.Fatal("a live member is gone")
	}
	if !n.HolderGone(t.Context(), "never-a-member") {
		t.Fatal("an instance that never was a member is not gone")
	}
	o.Crash()
	testenv.Eventually(t, 5*cfg.Lease, "the crashed member is gone", func() bool { return n.HolderGone(t.Context(), o.ClaimHolder()) })
}
