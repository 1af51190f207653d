package httpserver

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Checks are an application's own readiness checks, which /readyz runs
// after the store's and the timer scheduler's, in the order they were
// added. It is safe for concurrent use.
type Checks struct {
	mu   sync.Mutex
	list []namedCheck
}

type namedCheck struct {
	name  string
	check func(context.Context) error
}

// Add adds check under name, which names it in /readyz's answer; a name
// must be non-empty and not yet used.
func (c *Checks) Add(name string, check func(context.Context) error) error {
	if name == "" {
		return errors.New("readiness check: name must not be empty")
	}
	if check == nil {
		return fmt.Errorf("readiness check %q: check must not be nil", name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, nc := range c.list {
		if nc.name == name {
			return fmt.Errorf("readiness check %q: already added", name)
		}
	}
	c.list = append(c.list, namedCheck{name: name, check: check})
	return nil
}

// Run runs the checks in order and returns the name and error of the
// first that fails, or "" and nil. A nil *Checks has none.
func (c *Checks) Run(ctx context.Context) (string, error) {
	if c == nil {
		return "", nil
	}
	c.mu.Lock()
	list := c.list
	c.mu.Unlock()
	for _, nc := range list {
		if err := nc.check(ctx); err != nil {
			return nc.name, err
		}
	}
	return "", nil
}
