package runtime_test

import (
	"encoding/binary"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/trellis-go/trellis/internal/testkit/remotetest"
	trt "github.com/trellis-go/trellis/runtime"
)

// TestRemoteTellInOrder: messages told to an actor of another instance
// arrive, over the real transport, in the order told.
func TestRemoteTellInOrder(t *testing.T) {
	a, b := remotetest.NewNode(t, "a", nil), remotetest.NewNode(t, "b", nil)
	p := newProbe[int](t, b.Sys, "sink")
	at, err := trt.Expose(b.Sys, p.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if at.Addr != b.Addr() || at.Path != "/user/sink" {
		t.Fatalf("exposed at %v, want %s/user/sink", at, b.Addr())
	}
	ref := trt.RemoteRef[int](a.Sys, at.Addr, at.Path)
	if again := trt.RemoteRef[int](a.Sys, at.Addr, at.Path); again != ref {
		t.Fatal("two remote refs to one actor are not equal")
	}
	const n = 1000 // within what the transport queues per peer (peer.DefaultTellQueue)
	for i := range n {
		ref.Tell(i)
	}
	for i := range n {
		if got := p.Expect(t); got != i {
			t.Fatalf("message %d arrived as %d", i, got)
		}
	}
	if d := a.Sys.DeadLetters() + b.Sys.DeadLetters(); d != 0 {
		t.Fatalf("%d dead letters", d)
	}
}

// remotePing carries a ref to answer to: the codec writes its address.
type remotePing struct {
	N       uint64
	ReplyTo trt.Ref[uint64]
}

// remotePingCodec encodes a remotePing as N and the reply ref's address; it counts its
// uses, so the test sees that the registered codec, not JSON, ran.
type remotePingCodec struct {
	sys  *trt.System
	uses *atomic.Int64
}

func (c remotePingCodec) Encode(p remotePing) ([]byte, error) {
	c.uses.Add(1)
	a, err := trt.AddressOf(c.sys, p.ReplyTo)
	if err != nil {
		return nil, err
	}
	b := binary.AppendUvarint(nil, p.N)
	b = binary.AppendUvarint(b, uint64(len(a.Addr)))
	b = append(b, a.Addr...)
	return append(b, a.Path...), nil
}

func (c remotePingCodec) Decode(b []byte) (remotePing, error) {
	c.uses.Add(1)
	n, k := binary.Uvarint(b)
	l, k2 := binary.Uvarint(b[k:])
	if k <= 0 || k2 <= 0 || uint64(len(b)) < uint64(k+k2)+l {
		return remotePing{}, errors.New("short ping")
	}
	rest := b[k+k2:]
	addr, path := string(rest[:l]), string(rest[l:])
	return remotePing{N: n, ReplyTo: trt.ResolveRef[uint64](c.sys, trt.RefAddress{Addr: addr, Path: path})}, nil
}

// TestRemoteRefInMessage: a ref carried in a message (by a registered
// codec) reaches the other instance as a ref back to the sender's actor,
// and a ref that comes home resolves to the local actor.
func TestRemoteRefInMessage(t *testing.T) {
	a, b := remotetest.NewNode(t, "a", nil), remotetest.NewNode(t, "b", nil)
	var uses atomic.Int64
	trt.RegisterCodec[remotePing](a.Sys, remotePingCodec{a.Sys, &uses})
	trt.RegisterCodec[remotePing](b.Sys, remotePingCodec{b.Sys, &uses})
	replies := newProbe[uint64](t, a.Sys, "replies")
	echo, err := trt.Spawn(b.Sys, "echo", func() trt.Behavior[remotePing] {
		return trt.ReceiveFunc(func(_ *trt.Context[remotePing], p remotePing) { p.ReplyTo.Tell(p.N * 10) })
	})
	if err != nil {
		t.Fatal(err)
	}
	at, err := trt.Expose(b.Sys, echo)
	if err != nil {
		t.Fatal(err)
	}
	to := trt.RemoteRef[remotePing](a.Sys, at.Addr, at.Path)
	for i := uint64(1); i <= 3; i++ {
		to.Tell(remotePing{N: i, ReplyTo: replies.Ref})
		if got := replies.Expect(t); got != i*10 {
			t.Fatalf("reply %d, want %d", got, i*10)
		}
	}
	if uses.Load() != 6 {
		t.Fatalf("the ping codec ran %d times, want 6 (3 encodes, 3 decodes)", uses.Load())
	}
	home, _ := trt.AddressOf[uint64](a.Sys, replies.Ref)
	if r := trt.ResolveRef[uint64](a.Sys, home); r != replies.Ref {
		t.Fatalf("a ref to this instance's own actor resolved to %v, not the actor", r.Path())
	}
}

// TestRemoteDeadLetters: a message to a path nobody exposed, to an actor
// that stopped, or to an instance that is gone is a dead letter, counted,
// and Tell never waits.
func TestRemoteDeadLetters(t *testing.T) {
	cases := []struct {
		name string
		// send tells msgs to b through a's refs and says whose dead
		// letters count them.
		send func(t *testing.T, a, b *remotetest.Node) *trt.System
	}{
		{"path not exposed", func(t *testing.T, a, b *remotetest.Node) *trt.System {
			trt.RemoteRef[int](a.Sys, b.Addr(), "/user/nobody").Tell(1)
			return b.Sys
		}},
		{"actor stopped", func(t *testing.T, a, b *remotetest.Node) *trt.System {
			p := newProbe[int](t, b.Sys, "gone")
			at, err := trt.Expose(b.Sys, p.Ref)
			if err != nil {
				t.Fatal(err)
			}
			b.Sys.Stop(p.Ref)
			ref := trt.RemoteRef[int](a.Sys, at.Addr, at.Path)
			eventually(t, "mail to the stopped actor is a dead letter", func() bool {
				ref.Tell(1) // the first may come before the actor has stopped
				return b.Sys.DeadLetters() > 0
			})
			return b.Sys
		}},
		{"instance gone", func(t *testing.T, a, b *remotetest.Node) *trt.System {
			b.Kill()
			ref := trt.RemoteRef[int](a.Sys, b.Addr(), "/user/sink")
			for i := range 3000 { // more than the transport queues per peer
				ref.Tell(i)
			}
			return a.Sys
		}},
		{"no transport", func(t *testing.T, a, b *remotetest.Node) *trt.System {
			sys := newSystem(t)
			trt.RemoteRef[int](sys, b.Addr(), "/user/sink").Tell(1)
			return sys
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := remotetest.NewNode(t, "a", nil), remotetest.NewNode(t, "b", nil)
			counts := tc.send(t, a, b)
			eventually(t, "a dead letter", func() bool { return counts.DeadLetters() > 0 })
			if tc.name != "actor stopped" && counts.RemoteDeadLetters() == 0 {
				t.Fatal("the dead letter is not counted as remote")
			}
		})
	}
}

// TestRemoteExposureForgotten: once an exposed actor has stopped, its
// path is no longer exposed (no entry is kept for it), and a message for
// it is a dead letter of the receiving instance.
func TestRemoteExposureForgotten(t *testing.T) {
	a, b := remotetest.NewNode(t, "a", nil), remotetest.NewNode(t, "b", nil)
	p := newProbe[int](t, b.Sys, "brief")
	at, err := trt.Expose(b.Sys, p.Ref)
	if err != nil {
		t.Fatal(err)
	}
	done := newProbe[trt.AnyRef](t, b.Sys, "watcher")
	_, err = trt.Spawn(b.Sys, "watching", func() trt.Behavior[int] {
		return trt.Funcs[int]{Signal: func(ctx *trt.Context[int], s trt.Signal) {
			switch s := s.(type) {
			case trt.Started:
				ctx.Watch(p.Ref)
			case trt.Terminated:
				done.Ref.Tell(s.Ref)
			}
		}}
	})
	if err != nil {
		t.Fatal(err)
	}
	b.Sys.Stop(p.Ref)
	done.Expect(t)
	eventually(t, "the stopped actor's path no longer resolves to it", func() bool { return trt.ResolveRef[int](b.Sys, at) != p.Ref })
	trt.RemoteRef[int](a.Sys, at.Addr, at.Path).Tell(1)
	eventually(t, "a dead letter on b", func() bool { return b.Sys.DeadLetters() > 0 })
}
