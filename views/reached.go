package views

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"
)

// waitPoll is how often the positions of the generations waited for are
// read from the store while a wait is under way: a wait for a position
// another instance applies ends at most this long after (plus a read),
// one this instance's projector applies at once.
const waitPoll = 5 * time.Millisecond

// reached is what this instance knows of the positions of the views'
// generations, by shard, and it wakes the waits for them. A projector
// here tells it each position it applies; while waits are under way, one
// poller reads the positions of the generations waited for from the
// store, every waitPoll, for all of them (so the reads do not grow with
// the waits). A position only grows (a batch sets its last change's, a
// build the log's head), so a position known here is at or behind the
// store's.
type reached struct {
	read func(ctx context.Context, gen string) ([]uint64, error)
	log  *slog.Logger

	mu      sync.Mutex
	gens    map[string]*[numShards]reachedShard
	waits   map[string]int // generation → the waits under way
	polling bool
}

type reachedShard struct {
	pos  uint64
	grew chan struct{} // closed when pos grows; nil until a wait asks for it
}

// note records that generation gen applied shard up to pos.
func (r *reached) note(gen string, shard int, pos uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.shard(gen, shard)
	if pos <= s.pos {
		return
	}
	s.pos = pos
	if s.grew != nil {
		close(s.grew)
		s.grew = nil
	}
}

// get is the position known of gen's shard, and a channel closed once it
// grows.
func (r *reached) get(gen string, shard int) (uint64, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.shard(gen, shard)
	if s.grew == nil {
		s.grew = make(chan struct{})
	}
	return s.pos, s.grew
}

// shard is gen's record of shard; r.mu is held.
func (r *reached) shard(gen string, shard int) *reachedShard {
	if r.gens == nil {
		r.gens = make(map[string]*[numShards]reachedShard)
	}
	g := r.gens[gen]
	if g == nil {
		g = new([numShards]reachedShard)
		r.gens[gen] = g
	}
	return &g[shard]
}

// watch counts a wait for a position of gen until done is called: the
// poller runs while any wait is counted.
func (r *reached) watch(gen string) (done func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.waits == nil {
		r.waits = make(map[string]int)
	}
	r.waits[gen]++
	if !r.polling {
		r.polling = true
		go r.poll()
	}
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.waits[gen]--; r.waits[gen] == 0 {
			delete(r.waits, gen)
		}
	}
}

// poll reads the positions of the generations waited for every
// waitPoll, until no wait is left.
func (r *reached) poll() {
	tick := time.NewTicker(waitPoll)
	defer tick.Stop()
	var warned time.Time
	for {
		<-tick.C
		r.mu.Lock()
		if len(r.waits) == 0 {
			r.polling = false
			r.mu.Unlock()
			return
		}
		gens := slices.Collect(maps.Keys(r.waits))
		r.mu.Unlock()
		for _, gen := range gens {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			pos, err := r.read(ctx, gen)
			cancel()
			if err != nil {
				if time.Since(warned) > time.Second { // once a second while the store fails
					warned = time.Now()
					r.log.Warn("views: read the positions for the waits", "generation", gen, "err", err.Error())
				}
				continue
			}
			for shard, p := range pos {
				r.note(gen, shard, p)
			}
		}
	}
}
