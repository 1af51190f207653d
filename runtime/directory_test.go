package runtime_test

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/testkit/remotetest"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	trt "github.com/trellis-go/trellis/runtime"
)

// TestDirectoryAfterRegistrations: the system may be connected, with its
// directory, after the application registered and looked up its services
// (an instance whose Redis answers only after its setup). What the instance registered before
// is then published to the other instances, and the services it followed
// before (by Find or Subscribe) list the other instances' actors too.
func TestDirectoryAfterRegistrations(t *testing.T) {
	const lease = 600 * time.Millisecond
	cases := []struct {
		name   string
		follow func(t *testing.T, sys *trt.System, key trt.ServiceKey[string]) func() []string // started before the directory; returns what it lists now
	}{
		{"found before", func(t *testing.T, sys *trt.System, key trt.ServiceKey[string]) func() []string {
			trt.Find(sys, key)
			return func() []string { return listed(trt.Find(sys, key)) }
		}},
		{"subscribed before", func(t *testing.T, sys *trt.System, key trt.ServiceKey[string]) func() []string {
			p := newProbe[trt.Listing[string]](t, sys, "subscriber")
			trt.Subscribe(sys, key, p.Ref)
			var last []string
			return func() []string {
				for {
					l, ok := p.Next(10 * time.Millisecond)
					if !ok {
						return last
					}
					last = listed(l.Refs)
				}
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rdb := testenv.Redis(t)
			space := keyspace.Must("late-directory-" + uuid.NewString()[:8])
			key := trt.NewServiceKey[string]("workers")
			dir := &remotetest.Directory{Client: rdb, Space: space, Lease: lease}
			early := remotetest.NewNodeWith(t, "early", remotetest.Config{Directory: dir})
			late := remotetest.NewNodeWith(t, "late", remotetest.Config{Directory: dir, Deferred: true})
			trt.Register(early.Sys, key, newProbe[string](t, early.Sys, "w-early").Ref)

			trt.Register(late.Sys, key, newProbe[string](t, late.Sys, "w-late").Ref)
			lateSees := tc.follow(t, late.Sys, key)
			late.Connect(t)

			earlyWants := sorted("/user/w-early", late.Addr()+"/user/w-late")
			eventually(t, "the early instance lists the late one's registration", func() bool {
				return slices.Equal(listed(trt.Find(early.Sys, key)), earlyWants)
			})
			lateWants := sorted(early.Addr()+"/user/w-early", "/user/w-late")
			eventually(t, "the late instance lists the early one's registration", func() bool {
				return slices.Equal(lateSees(), lateWants)
			})
		})
	}
}

// listed names refs by address and path (a local ref by its path only),
// sorted.
func listed[T any](refs []trt.Ref[T]) []string {
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		a, ok := trt.Address(r)
		if !ok {
			a = trt.RefAddress{Path: r.Path()}
		}
		out = append(out, a.String())
	}
	return sorted(out...)
}

func sorted(s ...string) []string { slices.Sort(s); return s }
