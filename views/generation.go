package views

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/trellis-go/trellis/api"
)

// A view's rows are kept under its generation (viewDef.gen): its name and
// a fingerprint of its version, entity type and queries. A view whose
// version or queries changed is a new generation, built from the
// entities' current states like a new view, while queries read the
// generation the store names as answering (built on every shard: the one
// of before). Once the new generation is built on every shard, the first
// instance to see it names it answering: the swap. The old generation's
// keys are left for the operator to remove.

// generation is what the store keeps of the answering generation of a
// view: its key, and the fingerprint of each of its queries (a query of
// the new generation is answered by the old one only when its index
// holds the same).
type generation struct {
	Gen     string            `json:"gen"`
	Queries map[string]string `json:"queries"`
	// Retired are the generations that answered before (the latest
	// maxRetired): an instance that still runs the code of one of them
	// does not swap it back in.
	Retired []string `json:"retired,omitempty"`
}

// maxRetired is how many retired generations the record keeps.
const maxRetired = 20

// swapEvery is how often the runner checks whether a view's new
// generation is built on every shard.
const swapEvery = time.Second

// generations is the runner's picture of each view's answering
// generation.
type generations struct {
	mu   sync.Mutex
	seen map[string]genSeen // by view name
}

type genSeen struct {
	g  generation
	at time.Time
}

// ErrRebuilding is wrapped (in a 503) when a query new in a view, or
// changed, is asked before the view's new generation is built.
var ErrRebuilding = fmt.Errorf("views: the view is being rebuilt")

// answering is the generation of d that answers query qi now: d itself
// once swapped in (or when no other was ever built), else the one before
// it, read from the store at most every swapEvery.
func (r *Runner) answering(ctx context.Context, d *viewDef, qi int) (*viewDef, error) {
	g, err := r.answeringGen(ctx, d)
	if err != nil {
		return nil, err
	}
	if g.Gen == "" || g.Gen == d.gen {
		return d, nil
	}
	q := d.queries[qi]
	if g.Queries[q.name] != q.fingerprint() {
		return nil, &api.RequestError{Status: http.StatusServiceUnavailable,
			Detail: fmt.Sprintf("query %s of view %s is new or changed, and the view is being rebuilt: retry in a moment", q.name, d.name),
			Err:    fmt.Errorf("view %s: %w", d.name, ErrRebuilding)}
	}
	old := *d
	old.gen = g.Gen
	return &old, nil
}

func (r *Runner) answeringGen(ctx context.Context, d *viewDef) (generation, error) {
	r.gens.mu.Lock()
	seen, ok := r.gens.seen[d.name]
	r.gens.mu.Unlock()
	if ok && (seen.g.Gen == d.gen || time.Since(seen.at) < swapEvery) {
		return seen.g, nil
	}
	g, err := r.cfg.Store.generation(ctx, d.name)
	if err != nil {
		return generation{}, err
	}
	r.noteGen(d.name, g)
	return g, nil
}

func (r *Runner) noteGen(view string, g generation) {
	r.gens.mu.Lock()
	defer r.gens.mu.Unlock()
	if r.gens.seen == nil {
		r.gens.seen = make(map[string]genSeen)
	}
	r.gens.seen[view] = genSeen{g: g, at: time.Now()}
}

// swapLoop swaps in each view's generation once it is built on every
// shard, checking every swapEvery until r stops.
func (r *Runner) swapLoop() {
	defer close(r.swapDone)
	tick := time.NewTicker(swapEvery)
	defer tick.Stop()
	for {
		r.mu.Lock()
		ds := make([]*viewDef, 0, len(r.views))
		for _, d := range r.views {
			ds = append(ds, d)
		}
		r.mu.Unlock()
		for _, d := range ds {
			if err := r.trySwap(context.Background(), d); err != nil {
				r.log.Warn("views: swap in a new generation", "view", d.name, "err", err.Error())
			}
		}
		select {
		case <-r.stop:
			return
		case <-tick.C:
		}
	}
}

// trySwap names d's generation answering when it is built on every
// shard and another answers.
func (r *Runner) trySwap(ctx context.Context, d *viewDef) error {
	ctx, cancel := context.WithTimeout(ctx, swapEvery)
	defer cancel()
	g, err := r.answeringGen(ctx, d)
	if err != nil || g.Gen == d.gen || slices.Contains(g.Retired, d.gen) {
		return err // answering, or retired: this instance runs older code
	}
	// The first generation of a view answers at once (there is no other),
	// and is named so, to be retired by the next; a later one once it is
	// built on every shard.
	if g.Gen != "" {
		for shard := range numShards {
			if _, built, err := r.cfg.Store.position(ctx, d.gen, shard); err != nil || !built {
				return err
			}
		}
	}
	next := generation{Gen: d.gen, Queries: make(map[string]string, len(d.queries)), Retired: g.Retired}
	for _, q := range d.queries {
		next.Queries[q.name] = q.fingerprint()
	}
	if g.Gen != "" {
		next.Retired = append(slices.Clone(g.Retired), g.Gen)
		next.Retired = next.Retired[max(0, len(next.Retired)-maxRetired):]
	}
	swapped, err := r.cfg.Store.setGeneration(ctx, d.name, g, next)
	if err != nil || !swapped {
		r.gens.mu.Lock()
		delete(r.gens.seen, d.name) // another swapped first: read it again
		r.gens.mu.Unlock()
		return err
	}
	if g.Gen != "" {
		r.log.Info("views: swapped in the view's new generation", "view", d.name, "generation", d.gen, "before", g.Gen)
	}
	r.noteGen(d.name, next)
	return nil
}

// Rebuilt reports whether view's own generation answers its queries (it
// is built on every shard, and swapped in).
func (r *Runner) Rebuilt(ctx context.Context, view string) (bool, error) {
	d, err := r.view(view)
	if err != nil {
		return false, err
	}
	g, err := r.answeringGen(ctx, d)
	return g.Gen == d.gen, err
}

func encodeGen(g generation) string {
	data, _ := json.Marshal(g) // plain fields: never fails
	return string(data)
}

func decodeGen(text string) (generation, error) {
	var g generation
	if text == "" {
		return g, nil
	}
	err := json.Unmarshal([]byte(text), &g)
	return g, err
}
