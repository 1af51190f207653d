package views

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Query is a query declared with a view: equality on some of the row's
// fields, optionally a range and an order on one more, compiled to an
// index the view keeps up to date with its rows.
type Query[R any] struct {
	view *viewDef
	def  *queryDef
}

// Order is a query's sort order.
type Order int

// The orders: ascending (the lowest first) and descending.
const (
	Asc Order = iota
	Desc
)

// QueryOption configures a query.
type QueryOption func(*queryDef)

// Eq makes fields parameters of the query: a row is in its result when
// each of these fields equals the request's parameter of the same name.
func Eq(fields ...string) QueryOption {
	return func(q *queryDef) { q.eq = append(q.eq, fields...) }
}

// SortBy orders the result by field (then by row id). Without it, rows
// come in the order of their ids.
func SortBy(field string, o Order) QueryOption {
	return func(q *queryDef) { q.sort, q.desc = field, o == Desc }
}

// Range lets a request bound the query's result on field, which must be
// its sort field (SortBy; Range alone sorts by field, ascending):
// Request.Min (inclusive) and Request.Max (exclusive).
func Range(field string) QueryOption { return func(q *queryDef) { q.rangeField = field } }

// MaxLimit sets the most rows a page of the query may ask for
// (DefaultMaxLimit when not set).
func MaxLimit(n int) QueryOption { return func(q *queryDef) { q.maxLimit = max(n, 1) } }

// Limits of a page.
const (
	// DefaultLimit is a page's size when the request gives none (or the
	// query's maximum, when lower).
	DefaultLimit = 20
	// DefaultMaxLimit is the most rows a page may hold, unless the
	// query's MaxLimit says otherwise.
	DefaultMaxLimit = 100
)

// Query declares a query of the view named name. Declare every query
// before Start: Start compiles them and refuses one that names a field
// the row does not have, or cannot index.
func (v *View[S, R]) Query(name string, opts ...QueryOption) *Query[R] {
	q := &queryDef{name: name, maxLimit: DefaultMaxLimit}
	for _, o := range opts {
		o(q)
	}
	v.def.queries = append(v.def.queries, q)
	return &Query[R]{view: v.def, def: q}
}

// Name is the query's name.
func (q *Query[R]) Name() string { return q.def.name }

// queryDef is a query's declaration and, once compiled, its fields.
type queryDef struct {
	name       string
	eq         []string
	sort       string
	desc       bool
	rangeField string
	maxLimit   int

	eqFields  []*field
	sortField *field
}

// compile finds the query's fields among the row's.
func (q *queryDef) compile(fields map[string]*field, not map[string]string) error {
	lookup := func(name string) (*field, error) {
		if f := fields[name]; f != nil {
			return f, nil
		}
		if why, ok := not[name]; ok {
			return nil, fmt.Errorf("field %q: %s", name, why)
		}
		return nil, fmt.Errorf("field %q: the row has no such field (a query names the row's fields by their JSON names)", name)
	}
	q.eqFields = q.eqFields[:0]
	for _, name := range q.eq {
		f, err := lookup(name)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(q.eqFields, func(g *field) bool { return g.name == name }) {
			return fmt.Errorf("field %q: named twice in Eq", name)
		}
		q.eqFields = append(q.eqFields, f)
	}
	if q.rangeField != "" {
		switch {
		case q.sort == "":
			q.sort = q.rangeField
		case q.sort != q.rangeField:
			return fmt.Errorf("field %q: a range needs an index sorted by its field, and the query sorts by %q", q.rangeField, q.sort)
		}
	}
	if q.sort != "" {
		f, err := lookup(q.sort)
		if err != nil {
			return err
		}
		q.sortField = f
	}
	return nil
}

// fingerprint names what the query's index holds: a query of the same
// fingerprint in another generation of its view reads the same index.
func (q *queryDef) fingerprint() string {
	return fmt.Sprintf("%s|%q|%s|%t", q.name, q.eq, q.sort, q.desc)
}

// key is a row's key in the query's index: its equality fields, its sort
// field, its id.
func (q *queryDef) key(id string, row reflect.Value) string {
	var b []byte
	for _, f := range q.eqFields {
		b = f.appendValue(b, row)
	}
	if q.sortField != nil {
		b = q.sortField.appendValue(b, row)
	}
	return string(appendString(b, id))
}

// Request is one page's query.
type Request struct {
	// Params are the equality parameters, by field name: one for each
	// field of the query's Eq, as text (a number in decimal, a bool as
	// true or false, a time in RFC 3339).
	Params map[string]string
	// Min (inclusive) and Max (exclusive) bound the query's Range field;
	// "" leaves that end open.
	Min, Max string
	// Limit is the most rows of the page: 0 is DefaultLimit; over the
	// query's maximum is refused.
	Limit int
	// Token is the previous page's Next: "" for the first page.
	Token string
	// After is a change position (a command's reply carries it) that the
	// view must have applied before the page is read; "" reads at once.
	After string
	// Wait bounds the wait for After (DefaultWait when zero, at most
	// MaxWait).
	Wait time.Duration
}

// Page is one page of a query's result.
type Page[R any] struct {
	// Rows are the page's rows, in the query's order; IDs their entities'
	// ids.
	Rows []R
	IDs  []string
	// Next is the token of the next page; "" when this page is the last.
	Next string
}

// scan is a request checked against its query: the bounds of the index
// range it reads, and its limit.
type scan struct {
	q      *queryDef
	prefix string // the equality parameters' encoding
	lo, hi string // ZRANGEBYLEX bounds, ascending
	limit  int
}

// plan checks req's parameters and limit.
func (q *queryDef) plan(req Request) (*scan, error) {
	limit := req.Limit
	switch {
	case limit == 0:
		limit = min(DefaultLimit, q.maxLimit)
	case limit < 0 || limit > q.maxLimit:
		return nil, refuse(ErrBadLimit, "limit", "%d is not between 1 and the query's maximum, %d", limit, q.maxLimit)
	}
	for name := range req.Params {
		if !slices.ContainsFunc(q.eqFields, func(f *field) bool { return f.name == name }) {
			return nil, refuse(ErrBadParam, name, "not a parameter of query %s (its parameters: %s)", q.name, strings.Join(q.eq, ", "))
		}
	}
	var b []byte
	for _, f := range q.eqFields {
		text, ok := req.Params[f.name]
		if !ok {
			return nil, refuse(ErrBadParam, f.name, "missing: query %s needs it", q.name)
		}
		var err error
		if b, err = f.appendParam(b, f.name, text); err != nil {
			return nil, err
		}
	}
	s := &scan{q: q, prefix: string(b), lo: "[" + string(b), hi: "(" + above(string(b)), limit: limit}
	for _, end := range []struct {
		param, text string
		set         func(string)
	}{
		{"min", req.Min, func(k string) { s.lo = "[" + k }},
		{"max", req.Max, func(k string) { s.hi = "(" + k }},
	} {
		if end.text == "" {
			continue
		}
		if q.rangeField == "" {
			return nil, refuse(ErrBadParam, end.param, "query %s takes no range", q.name)
		}
		k, err := q.sortField.appendParam(b, end.param, end.text)
		if err != nil {
			return nil, err
		}
		end.set(string(k))
	}
	return s, nil
}
