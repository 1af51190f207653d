package views

import (
	"slices"
	"testing"

	"github.com/trellis-go/trellis/entities"
)

// TestTakeHeard: a projector takes the changes heard that follow its
// position with no gap, in order, at most a batch; with a gap before the
// next (heard out of order, or written by another instance) it takes
// none, so the step reads the log; what it applied is dropped.
func TestTakeHeard(t *testing.T) {
	seqs := func(cs []entities.Change) []uint64 {
		var out []uint64
		for _, c := range cs {
			out = append(out, c.Seq)
		}
		return out
	}
	p := &projector{kick: make(chan struct{}, 1), pos: 3}
	for _, seq := range []uint64{2, 5, 4, 7} { // 2 applied already; 6 not heard
		p.hear(entities.Change{Seq: seq})
	}
	got, head, ok := p.takeHeard()
	if !ok || !slices.Equal(seqs(got), []uint64{4, 5}) || head != 7 {
		t.Fatalf("took %v (head %d, ok %v), want 4, 5 (head 7)", seqs(got), head, ok)
	}
	p.pos = 5
	if !p.heardLeft() {
		t.Fatal("change 7 is left, and heardLeft says none")
	}
	if got, _, ok := p.takeHeard(); ok {
		t.Fatalf("took %v across the gap at 6", seqs(got))
	}
	p.pos = 7 // the log's read applied 6 and 7
	if p.heardLeft() {
		t.Fatal("everything heard is applied, and heardLeft says some is left")
	}

	p = &projector{kick: make(chan struct{}, 1)}
	for seq := range uint64(maxHeard + 10) {
		p.hear(entities.Change{Seq: seq + 1})
	}
	got, _, ok = p.takeHeard()
	if !ok || len(got) != batch || got[0].Seq != 1 {
		t.Fatalf("took %d changes from %v, want a batch of %d from 1", len(got), seqs(got[:min(1, len(got))]), batch)
	}
	if len(p.heard) != maxHeard-batch {
		t.Fatalf("%d changes kept, want the first %d heard less the batch taken", len(p.heard), maxHeard)
	}
}

// TestReachedWakes: a wait on a generation's shard is woken when a
// position of that shard grows, not by another shard's or a lower one.
func TestReachedWakes(t *testing.T) {
	var r reached
	at, grew := r.get("g", 3)
	if at != 0 {
		t.Fatalf("nothing noted, and the position is %d", at)
	}
	r.note("g", 4, 10)
	r.note("h", 3, 10)
	select {
	case <-grew:
		t.Fatal("woken by another shard's or generation's position")
	default:
	}
	r.note("g", 3, 7)
	select {
	case <-grew:
	default:
		t.Fatal("the shard's position grew, and its wait was not woken")
	}
	r.note("g", 3, 5)
	if at, _ := r.get("g", 3); at != 7 {
		t.Fatalf("position %d, want 7 (it never goes back)", at)
	}
}
