package components

import (
	"fmt"
	"slices"
	"sync"
)

// Registry holds the running components by id. It is filled at start-up;
// every lookup after that is concurrent-safe.
type Registry struct {
	mu   sync.RWMutex
	byID map[string]Component
}

// NewRegistry makes an empty registry.
func NewRegistry() *Registry { return &Registry{byID: make(map[string]Component)} }

// Register adds c. An empty id, or one already registered, is an error
// (wrapping ErrDuplicate for the latter): ids are the keys of stored
// deferred calls, so two components must never share one.
func (r *Registry) Register(c Component) error {
	id := c.ComponentID()
	if id == "" {
		return fmt.Errorf("register %s component: the component id is empty", c.Kind())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, ok := r.byID[id]; ok {
		return fmt.Errorf("register %s %q: %w: a %s is registered under that id already", c.Kind(), id, ErrDuplicate, prev.Kind())
	}
	r.byID[id] = c
	return nil
}

// Lookup returns the component registered under id, or an error wrapping
// ErrUnknownComponent.
func (r *Registry) Lookup(id string) (Component, error) {
	r.mu.RLock()
	c, ok := r.byID[id]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("component %q: %w", id, ErrUnknownComponent)
	}
	return c, nil
}

// Components lists the registered components, sorted by id.
func (r *Registry) Components() []Component {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Component, 0, len(r.byID))
	for _, c := range r.byID {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Component) int {
		switch {
		case a.ComponentID() < b.ComponentID():
			return -1
		case a.ComponentID() > b.ComponentID():
			return 1
		}
		return 0
	})
	return out
}
