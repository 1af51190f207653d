package views

import (
	"cmp"
	"slices"

	"github.com/trellis-go/trellis/entities"
)

// maxHeard is how many changes heard a projector keeps until it applies
// them; those heard beyond are read from the log.
const maxHeard = 4 * batch

// hear keeps c, a change this instance wrote to p's shard (as the log
// holds it), for p's next step, and wakes p.
func (p *projector) hear(c entities.Change) {
	p.heardMu.Lock()
	if len(p.heard) < maxHeard {
		p.heard = append(p.heard, c)
	}
	p.heardMu.Unlock()
	p.wake()
}

// takeHeard takes the changes heard that follow p.pos with no gap, at
// most batch, in order, and returns them with the last change heard (the
// shard's head as far as p knows). ok is false when no change heard
// follows p.pos directly (none was heard, one was heard out of order, or
// another instance wrote the next): then the step reads the log, which
// holds every change.
func (p *projector) takeHeard() (changes []entities.Change, head uint64, ok bool) {
	p.heardMu.Lock()
	defer p.heardMu.Unlock()
	p.dropHeard()
	slices.SortFunc(p.heard, func(a, b entities.Change) int { return cmp.Compare(a.Seq, b.Seq) })
	n := 0
	for n < len(p.heard) && n < batch && p.heard[n].Seq == p.pos+uint64(n)+1 {
		n++
	}
	if n == 0 {
		return nil, 0, false
	}
	changes = slices.Clone(p.heard[:n])
	head = p.heard[len(p.heard)-1].Seq
	p.heard = slices.Delete(p.heard, 0, n)
	return changes, head, true
}

// heardLeft reports whether changes after p.pos were heard and not
// applied yet.
func (p *projector) heardLeft() bool {
	p.heardMu.Lock()
	defer p.heardMu.Unlock()
	p.dropHeard()
	return len(p.heard) > 0
}

// dropHeard drops the changes heard that p applied; p.heardMu is held.
func (p *projector) dropHeard() {
	p.heard = slices.DeleteFunc(p.heard, func(c entities.Change) bool { return c.Seq <= p.pos })
}
