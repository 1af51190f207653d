package peer

import (
	"testing"
)

// TestForwardPathRoundTrip: the names of a call read back from its path,
// whatever they hold; a path that is not a forward's is an error.
func TestForwardPathRoundTrip(t *testing.T) {
	for _, want := range []Call{
		{ComponentID: "orders", Method: "Place", EntityID: "o-1"},
		{ComponentID: "timed", Method: "Expire"},
		{ComponentID: "a b/c", Method: "d%2Fe", EntityID: "f/g?h#i ü/"},
	} {
		path, err := forwardPath(want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseForwardPath(path)
		if err != nil || got.String() != want.String() {
			t.Errorf("%s: path %q reads back as %s, %v", want, path, got, err)
		}
	}
	for _, bad := range []string{"/peer/v1/forward/c/m", "/peer/v1/forward//m/e", "/other/c/m/e", "/peer/v1/forward/c/m/%zz"} {
		if c, err := parseForwardPath(bad); err == nil {
			t.Errorf("%q reads as %s", bad, c)
		}
	}
	if _, err := forwardPath(Call{Method: "m"}); err == nil {
		t.Error("a call without a component has a path")
	}
}
