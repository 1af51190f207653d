package runtime_test

import (
	"errors"
	"testing"

	trt "github.com/trellis-go/trellis/runtime"
)

// tellNowhere is a transport that refuses every message.
type tellNowhere struct{}

func (tellNowhere) Tell(string, string, []byte) error { return errors.New("nowhere") }

// TestConnectOnce: a system is connected once, with an address and a
// transport; any other call is refused and leaves the first link in place.
func TestConnectOnce(t *testing.T) {
	cases := []struct {
		name  string
		links []trt.Link
		want  error // of the last call; nil: no error
		self  bool  // whether the system is connected after the calls
	}{
		{"one link", []trt.Link{{Self: "a:1", Remote: tellNowhere{}}}, nil, true},
		{"a second link", []trt.Link{{Self: "a:1", Remote: tellNowhere{}}, {Self: "b:1", Remote: tellNowhere{}}}, trt.ErrConnected, true},
		{"no address", []trt.Link{{Remote: tellNowhere{}}}, errAny, false},
		{"no transport", []trt.Link{{Self: "a:1"}}, errAny, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sys := newSystem(t)
			var err error
			for _, l := range tc.links {
				err = sys.Connect(l)
			}
			switch {
			case tc.want == nil && err != nil, tc.want == errAny && err == nil,
				tc.want != nil && tc.want != errAny && !errors.Is(err, tc.want):
				t.Fatalf("Connect = %v, want %v", err, tc.want)
			}
			p := newProbe[int](t, sys, "p")
			a, err := trt.Expose(sys, p.Ref)
			if connected := err == nil; connected != tc.self {
				t.Fatalf("connected = %v (%v), want %v", connected, err, tc.self)
			}
			if tc.self && a.Addr != "a:1" {
				t.Fatalf("exposed at %v: the first link's address is not kept", a)
			}
		})
	}
}

// errAny stands for any error in a case.
var errAny = errors.New("any error")
