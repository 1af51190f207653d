package runtime

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
)

// Remote is the transport that carries messages to actors of other
// instances: Tell queues msg, encoded, for the actor at path on the
// instance at addr, and returns without waiting. It delivers the messages
// of one sender to one instance in the order told, or not at all (at most
// once); an error says the message was not queued. The instance at addr
// hands what it receives to its System's [System.ReceiveRemote].
//
// The runtime knows no transport: the service links one in with
// [System.Connect] (the cluster transport's client, internal/peer, is
// one), so this package stays free of networking.
type Remote interface {
	Tell(addr, path string, msg []byte) error
}

// remoteHook is the transport Connect linked in.
type remoteHook struct {
	self string // this instance's address, as the others reach it
	r    Remote
}

// RefAddress names an actor across instances: the address of its instance
// and its path there.
type RefAddress struct {
	Addr string
	Path string
}

func (a RefAddress) String() string { return a.Addr + a.Path }

// remoteRef is a ref to an actor on another instance. It is a comparable
// value, so two refs to one remote actor compare equal (and key a map as
// one) without a table of them that would grow with every address seen.
type remoteRef[T any] struct {
	sys  *System
	addr RefAddress
}

// RemoteRef returns a ref to the actor at path on the instance at addr,
// which handles messages of type T. Tell encodes the message with
// CodecFor[T] and hands it to the transport; a message that cannot be
// encoded, or that the transport refuses, is a dead letter of sys, and so
// is one that the receiving instance cannot decode or finds no actor for
// (a dead letter there). The messages one sender tells one remote actor
// arrive in the order told, or are lost (at most once: a connection that
// breaks loses what was in flight); reliable delivery resends. Watching a
// remote ref does nothing: there is no remote death watch.
//
// The actor must be exposed on its instance ([Expose]), or named in a
// message that reached this one ([AddressOf] exposes it). A ref to this
// instance's own address is the local actor, when exposed.
func RemoteRef[T any](sys *System, addr, path string) Ref[T] {
	return ResolveRef[T](sys, RefAddress{Addr: addr, Path: path})
}

// ResolveRef returns the ref a decoded RefAddress names: the exposed local
// actor when the address is this instance's, else a remote ref. A local
// path that is not exposed (any more) gives a ref whose messages are dead
// letters.
func ResolveRef[T any](sys *System, a RefAddress) Ref[T] {
	if h := sys.remote.Load(); h != nil && a.Addr == h.self {
		if e, ok := sys.exposed.Load(a.Path); ok {
			if r, ok := e.(*exposure[T]); ok {
				return r.ref
			}
		}
	}
	return remoteRef[T]{sys: sys, addr: a}
}

func (r remoteRef[T]) Tell(msg T) {
	if err := r.tell(msg); err != nil {
		r.sys.remoteFailed(r, msg, err)
	}
}

func (r remoteRef[T]) tell(msg T) error {
	h := r.sys.remote.Load()
	if h == nil {
		return errNoRemote
	}
	b, err := CodecFor[T](r.sys).Encode(msg)
	if err != nil {
		return codecError[T]("encode", err)
	}
	return h.r.Tell(r.addr.Addr, r.addr.Path, b)
}

// Path is the actor's path on its instance.
func (r remoteRef[T]) Path() string      { return r.addr.Path }
func (r remoteRef[T]) target() actorCell { return nil }

// errNoRemote: Connect was not called.
var errNoRemote = errors.New("runtime: no transport to other instances (System.Connect)")

// Address returns where ref's actor is, as other instances name it, if ref
// is a remote ref.
func Address(ref AnyRef) (RefAddress, bool) {
	if r, ok := ref.(interface{ address() RefAddress }); ok {
		return r.address(), true
	}
	return RefAddress{}, false
}

func (r remoteRef[T]) address() RefAddress { return r.addr }

// exposure is a local ref that other instances may send to, with how to
// decode their messages for it.
type exposure[T any] struct {
	ref  Ref[T]
	name string
}

// deliver decodes msg and tells it to the exposed ref.
func (e *exposure[T]) deliver(sys *System, msg []byte) {
	m, err := CodecFor[T](sys).Decode(msg)
	if err != nil {
		sys.remoteFailed(pathRef(e.name), msg, codecError[T]("decode", err))
		return
	}
	e.ref.Tell(m)
}

func (e *exposure[T]) target() actorCell { return e.ref.target() }
func (e *exposure[T]) exposed() AnyRef   { return e.ref }

// gone reports whether the exposed actor has stopped for good.
func (e *exposure[T]) gone() bool {
	t := e.ref.target()
	return t != nil && t.terminated()
}

// delivering is what ReceiveRemote calls, whatever the exposure's type.
type delivering interface {
	deliver(sys *System, msg []byte)
	gone() bool
	target() actorCell
	exposed() AnyRef
}

// Expose lets other instances send to ref, a local actor of sys (or a
// message adapter of one), whose messages of type T they encode with
// CodecFor[T]. It returns the address they name it by: this instance's
// address and the actor's path (an adapter gets a name of its own). Exposing
// a ref again returns the same address. It fails for a ref that is not local
// to sys, and before the system is connected ([System.Connect]).
//
// An exposed actor is forgotten as it terminates (so are its exposed
// adapters): a later message for its path is a dead letter, unless
// another actor took the path and was exposed.
func Expose[T any](sys *System, ref Ref[T]) (RefAddress, error) {
	h := sys.remote.Load()
	switch {
	case h == nil:
		return RefAddress{}, errNoRemote
	case !IsLocal(sys, ref):
		if a, ok := Address(ref); ok {
			return a, nil // already names an actor elsewhere
		}
		return RefAddress{}, fmt.Errorf("runtime: expose %s: not an actor of system %q", ref.Path(), sys.name)
	}
	if name, ok := sys.exposedNames.Load(ref); ok {
		return RefAddress{Addr: h.self, Path: name.(string)}, nil
	}
	name := ref.Path()
	if _, isCell := ref.(*cell[T]); !isCell {
		name += "#" + strconv.FormatUint(sys.ids.Add(1), 10)
	}
	sys.exposed.Store(name, &exposure[T]{ref: ref, name: name})
	sys.exposedNames.Store(ref, name)
	sys.exposeMu.Lock()
	names, _ := sys.exposedBy.Load(ref.target())
	list, _ := names.([]string)
	sys.exposedBy.Store(ref.target(), append(slices.Clip(list), name))
	sys.exposeMu.Unlock()
	return RefAddress{Addr: h.self, Path: name}, nil
}

// unexpose forgets what was exposed of the actor a, which has terminated:
// later messages for it are dead letters, as for any path not exposed.
func (s *System) unexpose(a actorCell) {
	names, ok := s.exposedBy.LoadAndDelete(a)
	if !ok {
		return
	}
	for _, name := range names.([]string) {
		if e, ok := s.exposed.Load(name); ok && e.(delivering).target() == a {
			s.exposed.CompareAndDelete(name, e)
			s.exposedNames.Delete(e.(delivering).exposed())
		}
	}
}

// AddressOf is the address other instances name ref by, for a message that
// carries ref to them: a remote ref's own address, or a local ref's,
// exposed by this call (see [Expose]).
func AddressOf[T any](sys *System, ref Ref[T]) (RefAddress, error) {
	if a, ok := Address(ref); ok {
		return a, nil
	}
	return Expose(sys, ref)
}

// ReceiveRemote delivers a message that another instance told the exposed
// actor at path: decoded with the codec of the actor's message type and
// told to it, in the order received. A path not exposed, an actor that has
// stopped, and a message that cannot be decoded are dead letters. It
// never blocks: a transport may call it on its read loop.
func (s *System) ReceiveRemote(path string, msg []byte) {
	e, ok := s.exposed.Load(path)
	if !ok {
		s.remoteFailed(pathRef(path), msg, fmt.Errorf("runtime: no actor exposed at %q", path))
		return
	}
	d := e.(delivering)
	if d.gone() {
		s.exposed.CompareAndDelete(path, e)
		s.exposedNames.Range(func(k, v any) bool { // rare: an actor gone
			if v == path {
				s.exposedNames.Delete(k)
			}
			return true
		})
	}
	d.deliver(s, msg) // a stopped actor's mail is its dead letter
}

// RemoteDeadLetters counts the messages to or from other instances that
// were dead letters because of the transport or a codec (they are in
// DeadLetters too).
func (s *System) RemoteDeadLetters() uint64 { return s.remoteDead.Load() }

// remoteFailed makes msg a dead letter and logs why, at the dead letters'
// rate.
func (s *System) remoteFailed(to AnyRef, msg any, why error) {
	s.remoteDead.Add(1)
	if s.deadLetter(to, msg) {
		s.log.Info("remote dead letter", "to", to.Path(), "err", why.Error())
	}
}

// pathRef names a path that no ref stands for, in a dead letter.
type pathRef string

func (p pathRef) Path() string      { return string(p) }
func (p pathRef) target() actorCell { return nil }

// remoteState is the System's part of remote refs.
type remoteState struct {
	remote       atomic.Pointer[remoteHook]
	exposed      sync.Map // name -> *exposure[T]
	exposedNames sync.Map // local ref -> name
	exposedBy    sync.Map // actorCell -> []string: the names exposed of each actor
	exposeMu     sync.Mutex
	codecs       sync.Map // reflect.Type -> Codec[T]
	placement    atomic.Pointer[Placement]
	remoteDead   atomic.Uint64
}
