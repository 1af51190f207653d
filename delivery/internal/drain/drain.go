// Package drain keeps, per actor system, the controllers that take part in
// a graceful drain of reliable delivery (delivery.Drain), and runs one:
// stage by stage, each stage's controllers told at once and waited for.
//
// The stages are ordered so that the mailboxes carry what matters: the
// consumer controllers first tell their producer controllers what their
// consumers confirmed; the producer controllers then handle it (their
// reply comes after those Acks, which are earlier in their mailboxes, and
// after whatever they forward to their pattern controller); last, every
// controller with a durable queue stores every confirmation it knows of.
package drain

import (
	"context"
	"fmt"
	"sync"

	"github.com/trellis-go/trellis/runtime"
)

// Stage is a step of a drain.
type Stage int

const (
	// Consumers is the first stage: consumer controllers tell their
	// producer controllers what was confirmed.
	Consumers Stage = iota
	// Producers is the second: producer controllers handle what came
	// before.
	Producers
	// Queues is the last: controllers with a durable queue store their
	// confirmations.
	Queues
	stages
)

// A Member is told to do its part of a stage, on its own goroutine (by a
// message to itself), and calls done once it has.
type Member func(done func())

type registry struct {
	mu      sync.Mutex
	next    uint64
	members [stages]map[uint64]Member
	count   int
}

var systems sync.Map // *runtime.System -> *registry

// Register adds m to sys's stage st; the returned function removes it
// (a controller calls it as it stops).
func Register(sys *runtime.System, st Stage, m Member) (unregister func()) {
	v, _ := systems.LoadOrStore(sys, &registry{})
	r := v.(*registry)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.members[st] == nil {
		r.members[st] = make(map[uint64]Member)
	}
	r.next++
	id := r.next
	r.members[st][id] = m
	r.count++
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if _, ok := r.members[st][id]; !ok {
			return
		}
		delete(r.members[st], id)
		r.count--
		if r.count == 0 {
			systems.CompareAndDelete(sys, r)
		}
	}
}

// Run drains sys: every stage in order, each waited for until all its
// members are done, or until ctx ends (then with ctx's error).
func Run(ctx context.Context, sys *runtime.System) error {
	v, ok := systems.Load(sys)
	if !ok {
		return nil
	}
	r := v.(*registry)
	for st := range stages {
		r.mu.Lock()
		ms := make([]Member, 0, len(r.members[st]))
		for _, m := range r.members[st] {
			ms = append(ms, m)
		}
		r.mu.Unlock()
		left := make(chan struct{}, len(ms))
		for _, m := range ms {
			var once sync.Once
			m(func() { once.Do(func() { left <- struct{}{} }) })
		}
		for range ms {
			select {
			case <-left:
			case <-ctx.Done():
				return fmt.Errorf("delivery: drain, stage %d of %d: %w", st+1, stages, ctx.Err())
			}
		}
	}
	return nil
}
