package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Placement says where the entities of sharded types run when a system is
// one instance of several: each entity on the one instance that owns its
// shard now. A system gets one with its [Link] ([System.Connect]); without
// one (the default) every entity runs on its own system.
//
// With a Placement, [Sharding.Tell] (and an entity ref's) asks Where for
// every message: an entity here gets it as without one; an entity owned
// by another instance gets it over the transport ([System.Connect]),
// encoded with the codec of the entity type's messages ([CodecFor]), from
// that instance's region of the type; with no owner known, the message is
// a dead letter at once, never held. A message that reaches an instance
// that no longer owns its entity is sent on once to the owner it knows,
// and is a dead letter after that second hop. Messages across instances
// are at most once, like any remote tell: reliable delivery resends.
//
// The placement tells the system when entities move away, with
// [System.EntitiesLeaving], which stops those that run here. An entity
// type with [Entity.Local] set is not placed: a layer that routes to the
// owner itself (package entities) keeps its entities where it tells them.
type Placement interface {
	// Where reports whether entity id of entityType runs here now, and if
	// not, the transport address of the instance that owns it ("" when no
	// owner is known). It is called for every message, from any goroutine:
	// it must be fast and must not block.
	Where(entityType, id string) (addr string, here bool)
}

// where is the placement's answer for entity id, or here when there is no
// placement.
func (s *System) where(entityType, id string) (string, bool) {
	p := s.placement.Load()
	if p == nil {
		return "", true
	}
	return (*p).Where(entityType, id)
}

// EntitiesLeaving stops the entities that run here for which leaving
// reports true: their shard is being handed to another instance. The
// placement calls it as a shard leaves, once Where no longer reports them
// here, so that the messages sent meanwhile go to the new owner (or are
// dead letters) rather than start them again. Their mailboxes are dead
// letters, but what waited for the next incarnation of one that was being
// passivated goes to the new owner; what they had not confirmed, reliable
// delivery sends again to the new owner. It returns once each has been
// told to stop, without waiting.
func (s *System) EntitiesLeaving(leaving func(entityType, id string) bool) {
	s.mu.Lock()
	regions := make([]region, 0, len(s.regions))
	for _, r := range s.regions {
		regions = append(regions, r)
	}
	s.mu.Unlock()
	for _, r := range regions {
		r.stopLeaving(leaving)
	}
}

// regionPath is where the region of an entity type takes the messages
// other instances send to its entities.
func regionPath(entityType string) string { return "/system/sharding/" + entityType }

// maxHops bounds how often a message to an entity travels between
// instances: once to the owner its sender knows, once more if that one
// knew better.
const maxHops = 2

// A message to an entity across instances: the number of hops it has
// made, the entity id after its length (a uvarint), then the message as
// its codec wrote it. appendEntityMessage writes it into one buffer,
// with room for a short message after the header, which the codec fills.
func appendEntityMessage[T any](c Codec[T], hops byte, id string, msg T) ([]byte, error) {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(id)+128)
	b = append(b, hops)
	b = binary.AppendUvarint(b, uint64(len(id)))
	b = append(b, id...)
	return AppendEncode(c, b, msg)
}

var errEntityMessage = errors.New("runtime: malformed message to an entity")

func parseEntityMessage(b []byte) (hops byte, id string, msg []byte, err error) {
	if len(b) < 2 {
		return 0, "", nil, errEntityMessage
	}
	n, w := binary.Uvarint(b[1:])
	if w <= 0 || n > uint64(len(b)-1-w) {
		return 0, "", nil, errEntityMessage
	}
	start := 1 + w
	return b[0], string(b[start : start+int(n)]), b[start+int(n):], nil
}

// tellRemote sends msg to entity id on the instance at addr, as its hops-th
// hop.
func (s *Sharding[T]) tellRemote(addr, id string, hops byte, msg T) {
	to := &entityRef[T]{s: s, id: id}
	if addr == "" {
		s.sys.remoteFailed(to, msg, fmt.Errorf("runtime: entity %q of %q: no instance owns it now", id, s.key.name))
		return
	}
	h := s.sys.remote.Load()
	if h == nil {
		s.sys.remoteFailed(to, msg, errNoRemote)
		return
	}
	b, err := appendEntityMessage(CodecFor[T](s.sys), hops, id, msg)
	if err != nil {
		s.sys.remoteFailed(to, msg, codecError[T]("encode", err))
		return
	}
	if err := h.r.Tell(addr, s.path(), b); err != nil {
		s.sys.remoteFailed(to, msg, err)
	}
}

// regionEndpoint takes the messages other instances send to the entities
// of one type (exposed at the region's path by InitSharding).
type regionEndpoint[T any] struct{ s *Sharding[T] }

// deliver hands a message from another instance to its entity here, or
// sends it on to the owner if this instance no longer owns the entity and
// the message has a hop left.
func (e regionEndpoint[T]) deliver(sys *System, b []byte) {
	s := e.s
	hops, id, raw, err := parseEntityMessage(b)
	if err != nil {
		sys.remoteFailed(pathRef(s.path()), b, err)
		return
	}
	msg, err := CodecFor[T](sys).Decode(raw)
	if err != nil {
		sys.remoteFailed(&entityRef[T]{s: s, id: id}, raw, codecError[T]("decode", err))
		return
	}
	addr, here := s.where(id)
	switch {
	case here:
		s.tellHere(id, msg, false)
	case hops+1 < maxHops:
		s.tellRemote(addr, id, hops+1, msg)
	default:
		sys.remoteFailed(&entityRef[T]{s: s, id: id}, msg,
			fmt.Errorf("runtime: entity %q of %q: not owned here after %d hops", id, s.key.name, hops+1))
	}
}

func (regionEndpoint[T]) gone() bool        { return false }
func (regionEndpoint[T]) target() actorCell { return nil }
func (e regionEndpoint[T]) exposed() AnyRef { return pathRef(e.s.path()) }

// stopLeaving stops the entities of s for which leaving reports true.
func (s *Sharding[T]) stopLeaving(leaving func(entityType, id string) bool) {
	if s.local {
		return // its layer stops its entities as it hands them over
	}
	var stop []*cell[T]
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for id, e := range sh.entries {
			if leaving(s.key.name, id) {
				stop = append(stop, e.cell)
			}
		}
		sh.mu.Unlock()
	}
	for _, c := range stop {
		c.sendSystem(sysMsg{kind: sysStop})
	}
}
