package runtime

import (
	"errors"
	"fmt"
)

// Link is how a system reaches the other instances of its cluster: the
// address they reach it at (what a local ref sent to them is named by),
// the transport to them, and optionally the directory that makes the
// receptionist cluster-wide (nil: it stays local) and the placement of
// sharded entities (nil: every entity runs here, see [Placement]).
type Link struct {
	Self      string
	Remote    Remote
	Directory Directory
	Placement Placement
}

// ErrConnected is Connect's error when the system is already linked.
var ErrConnected = errors.New("runtime: the system is already connected to its cluster (System.Connect is called once)")

// Connect links the system to the other instances of its cluster. It is
// the one change made to a built system, and is made once (a second call
// is [ErrConnected]): a service connects its system when the cluster's
// transport is up, which may be after its setup has spawned, registered
// and looked up actors, as when its store answers only later.
//
// Until then a ref to another instance makes every message a dead letter,
// [Expose] fails, and the receptionist is local. From then on a remote
// ref's messages travel over l.Remote; with l.Directory, what was
// registered before is published to the other instances (its actors
// exposed, see [Expose]), every later registration too, and the services
// found or subscribed to, before or after, list the actors registered on
// the other instances as remote refs; with l.Placement, each sharded
// entity runs on the instance that owns it. Connect may run at the same time as
// any other call.
func (s *System) Connect(l Link) error {
	if l.Self == "" || l.Remote == nil {
		return fmt.Errorf("runtime: connect: a link needs this instance's address (%q) and a transport", l.Self)
	}
	if !s.remote.CompareAndSwap(nil, &remoteHook{self: l.Self, r: l.Remote}) {
		return ErrConnected
	}
	if l.Placement != nil {
		s.placement.Store(&l.Placement)
	}
	if l.Directory != nil {
		s.setDirectory(l.Directory)
	}
	return nil
}
