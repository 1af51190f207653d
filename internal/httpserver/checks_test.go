package httpserver_test

import (
	"context"
	"errors"
	"testing"

	"github.com/trellis-go/trellis/internal/httpserver"
)

// TestChecks: checks run in the order added and the first failing one is
// named; a name must be non-empty and new, and a check non-nil.
func TestChecks(t *testing.T) {
	var c httpserver.Checks
	down := errors.New("down")
	state := map[string]error{}
	for _, name := range []string{"a", "b", "c"} {
		if err := c.Add(name, func(context.Context) error { return state[name] }); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		failing  []string
		wantName string
	}{{nil, ""}, {[]string{"b"}, "b"}, {[]string{"c", "b"}, "b"}, {[]string{"a", "c"}, "a"}} {
		clear(state)
		for _, n := range tc.failing {
			state[n] = down
		}
		name, err := c.Run(t.Context())
		if name != tc.wantName || (tc.wantName == "") != (err == nil) {
			t.Errorf("failing %v: Run = %q, %v; want %q", tc.failing, name, err, tc.wantName)
		}
	}
	for _, bad := range []struct {
		name  string
		check func(context.Context) error
	}{{"", func(context.Context) error { return nil }}, {"a", func(context.Context) error { return nil }}, {"d", nil}} {
		if err := c.Add(bad.name, bad.check); err == nil {
			t.Errorf("Add(%q, nil check: %t) accepted", bad.name, bad.check == nil)
		}
	}
	if name, err := (*httpserver.Checks)(nil).Run(t.Context()); name != "" || err != nil {
		t.Errorf("nil Checks: %q, %v", name, err)
	}
}
