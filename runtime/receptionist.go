package runtime

import (
	"reflect"
	"slices"
	"strings"
	"sync"
)

// ServiceKey names a service that actors of message type T register under.
// Two keys are the same when both id and T are.
type ServiceKey[T any] struct{ id string }

// NewServiceKey makes the key for service id.
func NewServiceKey[T any](id string) ServiceKey[T] { return ServiceKey[T]{id: id} }

// ID is the service's id.
func (k ServiceKey[T]) ID() string { return k.id }

func (k ServiceKey[T]) name() serviceName {
	return serviceName{id: k.id, typ: reflect.TypeFor[T]()}
}

// Listing is the set of actors registered under a key, as sent to
// subscribers: once when they subscribe and after each change.
type Listing[T any] struct {
	Key  ServiceKey[T]
	Refs []Ref[T]
}

type serviceName struct {
	id  string
	typ reflect.Type
}

// receptionist is the system's registry of services. It is a lock-guarded
// map rather than an actor: everything is local, so a lookup can be a plain
// call, and an actor's registrations go away the moment it terminates.
type receptionist struct {
	mu       sync.Mutex
	services map[serviceName][]AnyRef
	subs     map[serviceName][]subscriber
	byActor  map[actorCell][]serviceName // registrations and subscriptions to drop when the actor stops
	directoryState
}

type subscriber struct {
	ref    AnyRef
	notify func(refs []AnyRef)
}

func (r *receptionist) init() {
	r.services = make(map[serviceName][]AnyRef)
	r.subs = make(map[serviceName][]subscriber)
	r.byActor = make(map[actorCell][]serviceName)
	r.initDirectory()
}

// Register lists ref under key until it is deregistered or its actor stops.
// Registering twice is the same as once; registering an actor that has
// already stopped does nothing.
func Register[T any](sys *System, key ServiceKey[T], ref Ref[T]) {
	r := &sys.reception
	r.mu.Lock()
	defer r.mu.Unlock()
	t := ref.target()
	if t == nil || !t.isAlive() {
		return
	}
	name := key.name()
	if slices.Contains(r.services[name], AnyRef(ref)) {
		return
	}
	r.services[name] = append(r.services[name], ref)
	r.byActor[t] = append(r.byActor[t], name)
	known[T](r, name)
	r.registered(sys, name, ref)
	r.publish(name)
}

// Deregister removes ref from key's listing.
func Deregister[T any](sys *System, key ServiceKey[T], ref Ref[T]) {
	r := &sys.reception
	r.mu.Lock()
	defer r.mu.Unlock()
	name := key.name()
	refs := r.services[name]
	if i := slices.Index(refs, AnyRef(ref)); i >= 0 {
		r.services[name] = slices.Delete(refs, i, i+1)
		r.dropByActor(ref.target(), name)
		delete(r.addrs, AnyRef(ref))
		r.publishMine(name)
		r.publish(name)
	}
}

// dropByActor forgets a's registration under name, so that an actor that
// registers and deregisters again and again does not grow byActor. byActor
// holds name once for the registration and once per subscription, so any
// one entry of name stands for the registration.
func (r *receptionist) dropByActor(a actorCell, name serviceName) {
	names := r.byActor[a]
	if i := slices.Index(names, name); i >= 0 {
		names = slices.Delete(names, i, i+1)
		if len(names) == 0 {
			delete(r.byActor, a)
			return
		}
		r.byActor[a] = names
	}
}

// Find returns the refs registered under key now, ordered by path: with a
// directory (Connect), those of the other instances too, as far as
// the directory has heard of them (the first Find of a key starts
// following it).
func Find[T any](sys *System, key ServiceKey[T]) []Ref[T] {
	r := &sys.reception
	r.mu.Lock()
	defer r.mu.Unlock()
	known[T](r, key.name())
	r.follow(sys, key.name())
	return typed[T](r.listed(key.name()))
}

// Subscribe sends subscriber the listing of key now and after every change,
// until the subscriber stops (or forever, for a ref that is not an actor).
// Subscribing an actor that has already stopped does nothing.
func Subscribe[T any](sys *System, key ServiceKey[T], subscriber Ref[Listing[T]]) {
	r := &sys.reception
	r.mu.Lock()
	defer r.mu.Unlock()
	t := subscriber.target()
	if t != nil && !t.isAlive() {
		// actorStopped, which drops an actor's subscriptions once it is
		// dead, may have run already: a subscription kept now would never
		// be dropped, and every later change would be a dead letter.
		return
	}
	name := key.name()
	s := subscriberOf(key, subscriber)
	r.subs[name] = append(r.subs[name], s)
	if t != nil {
		r.byActor[t] = append(r.byActor[t], name)
	}
	known[T](r, name)
	r.follow(sys, name)
	s.notify(r.listed(name))
}

func subscriberOf[T any](key ServiceKey[T], to Ref[Listing[T]]) subscriber {
	return subscriber{ref: to, notify: func(refs []AnyRef) {
		to.Tell(Listing[T]{Key: key, Refs: typed[T](refs)})
	}}
}

// typed copies refs, sorted by path, as Ref[T]s.
func typed[T any](refs []AnyRef) []Ref[T] {
	out := make([]Ref[T], 0, len(refs))
	for _, ref := range refs {
		out = append(out, ref.(Ref[T]))
	}
	slices.SortFunc(out, func(a, b Ref[T]) int { return strings.Compare(a.Path(), b.Path()) })
	return out
}

// publish tells every subscriber of name the new listing; the caller holds
// r.mu, so listings reach each subscriber in the order of the changes.
func (r *receptionist) publish(name serviceName) {
	for _, s := range r.subs[name] {
		s.notify(r.listed(name))
	}
}

// actorStopped drops everything the terminated actor registered or
// subscribed, telling the remaining subscribers.
func (r *receptionist) actorStopped(a actorCell) {
	r.mu.Lock()
	defer r.mu.Unlock()
	names, ok := r.byActor[a]
	if !ok {
		return
	}
	delete(r.byActor, a)
	for _, name := range names {
		r.subs[name] = slices.DeleteFunc(r.subs[name], func(s subscriber) bool { return s.ref.target() == a })
		before := len(r.services[name])
		r.services[name] = slices.DeleteFunc(r.services[name], func(ref AnyRef) bool {
			if ref.target() == a {
				delete(r.addrs, ref)
				return true
			}
			return false
		})
		if len(r.services[name]) != before {
			r.publishMine(name)
			r.publish(name)
		}
	}
}
