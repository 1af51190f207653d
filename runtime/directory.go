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
// died) or withdraws them (it left). The service wires one in with
// [System.SetDirectory].
type Directory interface {
	Publish(service string, refs []RefAddress)
	Watch(service string, update func(others []RefAddress))
}

// SetDirectory makes the receptionist cluster-wide through d: a
// registration is published to d (its actor exposed, see [Expose]), and a
// subscription or Find lists the actors registered on the other instances
// too, as remote refs. It needs SetRemote first; call it before the first
// Register or Subscribe.
func (s *System) SetDirectory(d Directory) {
	r := &s.reception
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dir = d
}

// directoryName is how a service is named in the directory: its id and
// message type, as two keys are the same when both are.
func (n serviceName) directoryName() string { return n.id + "|" + n.typ.String() }

// registered exposes ref for the directory and republishes name; the
// caller holds r.mu.
func registered[T any](sys *System, name serviceName, ref Ref[T]) {
	r := &sys.reception
	if r.dir == nil {
		return
	}
	if a, err := Expose(sys, ref); err == nil {
		r.addrs[AnyRef(ref)] = a
	} else {
		sys.log.Warn("receptionist: a registration is not published to the other instances", "ref", ref.Path(), "err", err.Error())
	}
	r.publishMine(name)
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

// watch starts following the other instances' refs of name, resolved as
// Ref[T]s, once per name; the caller holds r.mu.
func watch[T any](sys *System, name serviceName) {
	r := &sys.reception
	if r.dir == nil || r.watched[name] {
		return
	}
	r.watched[name] = true
	r.dir.Watch(name.directoryName(), func(others []RefAddress) {
		refs := make([]AnyRef, 0, len(others))
		for _, a := range others {
			refs = append(refs, ResolveRef[T](sys, a))
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
	dir     Directory
	addrs   map[AnyRef]RefAddress    // the exposed address of each registered ref
	watched map[serviceName]bool     // names followed in the directory
	remote  map[serviceName][]AnyRef // the other instances' refs of each name
}

func (d *directoryState) initDirectory() {
	d.addrs = make(map[AnyRef]RefAddress)
	d.watched = make(map[serviceName]bool)
	d.remote = make(map[serviceName][]AnyRef)
}
