package runtime

import (
	"slices"
)

// Directory shares the receptionist's registrations between instances, so
// that a subscriber on any instance sees the actors registered on every
// one (a cluster-wide receptionist). Publish replaces this instance's
// entries of a service and must not block; Watch calls update with the
// entries of the other instances, now and after each change, from a
// goroutine of the directory's, until the directory is closed. The
// directory drops the entries of an instance that stops renewing them (it
// died) or withdraws them (it left). The service links one in with
// [System.Connect].
type Directory interface {
	Publish(service string, refs []RefAddress)
	Watch(service string, update func(others []RefAddress))
}

// setDirectory makes the receptionist cluster-wide through d (see
// [System.Connect]): it publishes what was registered before and follows
// the services found or subscribed to before.
func (s *System) setDirectory(d Directory) {
	r := &s.reception
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dir = d
	for name, refs := range r.services {
		for _, ref := range refs {
			r.expose(s, name, ref)
		}
		r.publishMine(name)
	}
	for name := range r.followed {
		r.watch(s, name)
	}
}

// directoryName is how a service is named in the directory: its id and
// message type, as two keys are the same when both are.
func (n serviceName) directoryName() string { return n.id + "|" + n.typ.String() }

// typedOps is what the directory needs of a service's message type T, for
// the names of which only the generic calls know T: how a registered ref
// of T is exposed, and how another instance's address is resolved as a
// Ref[T].
type typedOps struct {
	expose  func(sys *System, ref AnyRef) (RefAddress, error)
	resolve func(sys *System, a RefAddress) AnyRef
}

// known records T's operations for name, once; the caller holds r.mu.
func known[T any](r *receptionist, name serviceName) {
	if _, ok := r.ops[name]; ok {
		return
	}
	r.ops[name] = typedOps{
		expose:  func(sys *System, ref AnyRef) (RefAddress, error) { return Expose(sys, ref.(Ref[T])) },
		resolve: func(sys *System, a RefAddress) AnyRef { return ResolveRef[T](sys, a) },
	}
}

// registered exposes ref for the directory and republishes name; the
// caller holds r.mu and recorded name's operations (known).
func (r *receptionist) registered(sys *System, name serviceName, ref AnyRef) {
	if r.dir == nil {
		return
	}
	r.expose(sys, name, ref)
	r.publishMine(name)
}

// expose exposes ref, registered under name, for the directory; the
// caller holds r.mu.
func (r *receptionist) expose(sys *System, name serviceName, ref AnyRef) {
	if a, err := r.ops[name].expose(sys, ref); err == nil {
		r.addrs[ref] = a
	} else {
		sys.log.Warn("receptionist: a registration is not published to the other instances", "ref", ref.Path(), "err", err.Error())
	}
}

// publishMine tells the directory this instance's refs of name; the caller
// holds r.mu.
func (r *receptionist) publishMine(name serviceName) {
	if r.dir == nil {
		return
	}
	mine := make([]RefAddress, 0, len(r.services[name]))
	for _, ref := range r.services[name] {
		if a, ok := r.addrs[ref]; ok {
			mine = append(mine, a)
		}
	}
	r.dir.Publish(name.directoryName(), mine)
}

// follow lists the other instances' refs of name from now on (from when
// there is a directory, if there is none yet); the caller holds r.mu and
// recorded name's operations (known).
func (r *receptionist) follow(sys *System, name serviceName) {
	if r.followed[name] {
		return
	}
	r.followed[name] = true
	if r.dir != nil {
		r.watch(sys, name)
	}
}

// watch starts following name in the directory; the caller holds r.mu.
func (r *receptionist) watch(sys *System, name serviceName) {
	resolve := r.ops[name].resolve
	r.dir.Watch(name.directoryName(), func(others []RefAddress) {
		refs := make([]AnyRef, 0, len(others))
		for _, a := range others {
			refs = append(refs, resolve(sys, a))
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if !slices.Equal(r.remote[name], refs) {
			r.remote[name] = refs
			r.publish(name)
		}
	})
}

// listed is what subscribers of name see: the local refs and the other
// instances'; the caller holds r.mu.
func (r *receptionist) listed(name serviceName) []AnyRef {
	if len(r.remote[name]) == 0 {
		return r.services[name]
	}
	return append(slices.Clip(r.services[name]), r.remote[name]...)
}

// directoryState is the receptionist's part of a directory.
type directoryState struct {
	dir      Directory
	ops      map[serviceName]typedOps // how each name's refs are exposed and resolved
	addrs    map[AnyRef]RefAddress    // the exposed address of each registered ref
	followed map[serviceName]bool     // names found or subscribed to: followed in the directory once there is one
	remote   map[serviceName][]AnyRef // the other instances' refs of each name
}

func (d *directoryState) initDirectory() {
	d.addrs = make(map[AnyRef]RefAddress)
	d.ops = make(map[serviceName]typedOps)
	d.followed = make(map[serviceName]bool)
	d.remote = make(map[serviceName][]AnyRef)
}
