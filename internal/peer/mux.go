package peer

import (
	"context"
	"fmt"
	"sync"
)

// Mux routes each forwarded call to the handler of its kind: the kinds
// are component ids that their owners register (Handle), such as the
// durable producers' hand-over to a queue's owner, and every other call
// goes to the fallback, which runs the entities' commands. The wire is
// the same for every kind: a Call names its kind by its ComponentID.
// A Mux is safe for concurrent use; its Serve is a [Handler].
type Mux struct {
	fallback Handler

	mu    sync.RWMutex
	kinds map[string]Handler
}

// NewMux makes a Mux that hands every call of no registered kind to
// fallback.
func NewMux(fallback Handler) *Mux {
	return &Mux{fallback: fallback, kinds: make(map[string]Handler)}
}

// Handle registers h for the calls whose component id is kind. A kind is
// registered once: a second registration is an error, and so is an empty
// kind or a nil h.
func (m *Mux) Handle(kind string, h Handler) error {
	if kind == "" || h == nil {
		return fmt.Errorf("peer mux: a kind of call needs a name and a handler (kind %q)", kind)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.kinds[kind]; ok {
		return fmt.Errorf("peer mux: the kind of call %q is registered already", kind)
	}
	m.kinds[kind] = h
	return nil
}

// Serve runs c by the handler of its kind, or by the fallback.
func (m *Mux) Serve(ctx context.Context, c Call) (Reply, error) {
	m.mu.RLock()
	h, ok := m.kinds[c.ComponentID]
	m.mu.RUnlock()
	if !ok {
		h = m.fallback
	}
	return h(ctx, c)
}
