package views

import "context"

// BuiltEverywhere reports whether view's rows are built on every shard:
// a stream that reads its rows after that is reset only by a rebuild or
// a feed's trim, never by a shard's first build.
func BuiltEverywhere(ctx context.Context, r *Runner, view string) (bool, error) {
	d, err := r.view(view)
	if err != nil {
		return false, err
	}
	for shard := range numShards {
		if _, built, err := r.cfg.Store.position(ctx, d.gen, shard); err != nil || !built {
			return false, err
		}
	}
	return true, nil
}
