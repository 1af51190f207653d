package runtime_test

import (
	"slices"
	"testing"
	"time"

	trt "github.com/trellis-go/trellis/runtime"
)

// TestTakeQueued: a handler takes the messages queued behind its own, in
// order and up to its max; they are not delivered again; what arrives
// while it runs comes after, as always.
func TestTakeQueued(t *testing.T) {
	cases := []struct {
		name string
		max  int
		want [][]int // each delivery: the message, then what it took
	}{
		{"all", 10, [][]int{{0}, {1, 2, 3, 4, 5}, {6}}},
		{"up to max", 2, [][]int{{0}, {1, 2, 3}, {4, 5}, {6}}},
		{"none", 0, [][]int{{0}, {1}, {2}, {3}, {4}, {5}, {6}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sys := newSystem(t)
			release := make(chan struct{})
			got := make(chan []int, 16)
			ref, err := trt.Spawn(sys, "", func() trt.Behavior[int] {
				return trt.ReceiveFunc(func(ctx *trt.Context[int], m int) {
					if m == 0 {
						got <- []int{0}
						<-release // 1 to 5 queue meanwhile
						return
					}
					took := ctx.TakeQueued(tc.max, []int{m})
					if m == 1 {
						ref := ctx.Self()
						ref.Tell(6) // arrives while 1 is handled: not taken with it
					}
					got <- took
				})
			})
			if err != nil {
				t.Fatal(err)
			}
			ref.Tell(0)
			recvN(t, got, 1)
			for m := 1; m <= 5; m++ {
				ref.Tell(m)
			}
			close(release)
			var deliveries [][]int
			deliveries = append(deliveries, []int{0})
			for n := 1; n <= 6; {
				d := recvN(t, got, 1)[0]
				deliveries = append(deliveries, d)
				n += len(d)
			}
			if !slices.EqualFunc(deliveries, tc.want, slices.Equal[[]int]) {
				t.Fatalf("deliveries %v, want %v", deliveries, tc.want)
			}
			ref.Tell(7) // a message delivered again would come before it
			if d := recvN(t, got, 1)[0]; d[0] != 7 {
				t.Fatalf("after the last delivery came %v, want [7]", d)
			}
		})
	}
}

func recvN(t *testing.T, ch chan []int, n int) [][]int {
	t.Helper()
	var out [][]int
	for range n {
		select {
		case v := <-ch:
			out = append(out, v)
		case <-time.After(waitLimit):
			t.Fatalf("no delivery within %v", waitLimit)
		}
	}
	return out
}
