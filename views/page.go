package views

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Page reads one page of the query's result on r, the service's views
// (any instance: the rows are in the store). Its errors are Go errors
// wrapping ErrBadToken, ErrBadParam, ErrBadLimit, ErrBadPosition (each a
// 400 for api.WriteError), ErrBehind, ErrNotStarted, or the store's.
func (q *Query[R]) Page(ctx context.Context, r *Runner, req Request) (*Page[R], error) {
	raw, err := r.Page(ctx, q.view.name, q.def.name, req)
	if err != nil {
		return nil, err
	}
	out := &Page[R]{Rows: make([]R, len(raw.Rows)), IDs: raw.IDs, Next: raw.Next}
	for i, row := range raw.Rows {
		if err := json.Unmarshal(row, &out.Rows[i]); err != nil {
			return nil, fmt.Errorf("view %s: decode the row of %s: %w", q.view.name, raw.IDs[i], err)
		}
	}
	return out, nil
}

// RawPage is a page whose rows are left in their JSON form.
type RawPage struct {
	Rows []json.RawMessage
	IDs  []string
	Next string
}

// Page reads one page of query of view by their names, its rows in their
// JSON form: for an endpoint that serves any query. An unknown query
// wraps ErrUnknownQuery (a 400 for api.WriteError).
func (r *Runner) Page(ctx context.Context, view, query string, req Request) (*RawPage, error) {
	d, qi, s, err := r.plan(view, query, req)
	if err != nil {
		return nil, err
	}
	g, err := r.answering(ctx, d, qi)
	if err != nil {
		return nil, err
	}
	var tok *token
	if req.Token != "" {
		if tok, err = r.parseToken(ctx, req.Token, g, s); err != nil {
			return nil, err
		}
	}
	if req.After != "" {
		if err := r.waitFor(ctx, g.gen, req.After, req.Wait); err != nil {
			return nil, err
		}
	}
	rows, next, _, err := r.read(ctx, g, qi, s, tok, false)
	if err != nil {
		return nil, err
	}
	out := &RawPage{}
	for _, e := range rows {
		out.Rows = append(out.Rows, e.row)
		out.IDs = append(out.IDs, e.id)
	}
	if next != nil {
		if out.Next, err = r.sealToken(ctx, next); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// read reads the page of query qi (s checked) that tok continues (nil:
// the first), its rows in the query's order; next is the token of the
// page after (nil: it is the last). With positions, the first page also
// returns every shard's position read with its rows.
func (r *Runner) read(ctx context.Context, d *viewDef, qi int, s *scan, tok *token, positions bool) (rows []entry, next *token, pos []uint64, err error) {
	qd := d.queries[qi]
	b := bounds{lo: s.lo, hi: s.hi, desc: qd.desc, limit: s.limit}
	snapshot := int64(-1)
	if tok != nil {
		last := string(tok.Last)
		if qd.desc {
			b.hi = "(" + last
		} else {
			b.lo = "(" + above(last)
		}
		snapshot, positions = int64(tok.Seq), false
	}
	res, err := r.cfg.Store.scan(ctx, d, qi, b, snapshot, positions)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(res.rows) > s.limit {
		next = &token{Version: tokenVersion, View: d.name, Gen: d.gen, Query: qd.name, Hash: s.hash(), Last: []byte(res.rows[s.limit-1].key), Seq: res.seq}
		res.rows = res.rows[:s.limit]
	}
	return res.rows, next, res.pos, nil
}

// plan finds query of view and checks req against it. An unknown query
// wraps ErrUnknownQuery.
func (r *Runner) plan(view, query string, req Request) (*viewDef, int, *scan, error) {
	d, err := r.view(view)
	if err != nil {
		return nil, 0, nil, err
	}
	qi, qd := d.query(query)
	if qd == nil {
		names := make([]string, len(d.queries))
		for i, q := range d.queries {
			names[i] = q.name
		}
		return nil, 0, nil, refuse(ErrUnknownQuery, "query", "view %s has no query %q (its queries: %s)", view, query, strings.Join(names, ", "))
	}
	s, err := qd.plan(req)
	if err != nil {
		return nil, 0, nil, err
	}
	return d, qi, s, nil
}
