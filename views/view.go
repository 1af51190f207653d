package views

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"reflect"
	"sync"
	"time"

	"github.com/trellis-go/trellis/entities"
)

// View is the definition of a view: its name, the source whose changes
// it is built from (an entity type, a workflow type), its updater and its
// queries. It holds no running state: Start adds it to a service's
// runner.
type View[S, R any] struct {
	def    *viewDef
	decode func(id string, revision uint64, data []byte) (S, error)
	update func(Change[S]) Update[R]
	// fold, for a view over events, makes the update of a change from it
	// and the row before it (decode and update are nil then).
	fold func(c entities.Change, row []byte) (Update[R], error)

	compiled   sync.Once
	compileErr error
}

// Change is one change of an entity as an updater gets it.
type Change[S any] struct {
	EntityID string
	// State is the entity's state; its empty state when Deleted.
	State S
	// Revision is the state's revision (for a deletion, the revision of
	// the state deleted); 0 for a state read while the view is built.
	Revision uint64
	Deleted  bool
	// At is when the change was recorded (the store's clock); zero for a
	// state read while the view is built.
	At time.Time
}

// Update is what an updater makes of a change: the entity's row set to a
// value (Upsert), removed (Delete), or left as it is (Ignore).
type Update[R any] struct {
	op  updateOp
	row R
}

type updateOp int

const (
	opIgnore updateOp = iota
	opUpsert
	opDelete
)

// Upsert sets the changed entity's row to row.
func Upsert[R any](row R) Update[R] { return Update[R]{op: opUpsert, row: row} }

// Delete removes the changed entity's row, if it has one.
func Delete[R any]() Update[R] { return Update[R]{op: opDelete} }

// Ignore leaves the changed entity's row as it is.
func Ignore[R any]() Update[R] { return Update[R]{} }

// Define defines a view named name (its rows and indexes are kept under
// it: renaming a view builds a new one) over entity's changes: each
// entity has at most one row, which update sets from each change of the
// entity, in the order of the changes. update must be a pure function of
// the change: it runs again on a replay, and over every entity's current
// state when the view is built. R is a struct encoded with encoding/json;
// queries name its fields by their JSON names.
func Define[S, R any](name string, entity *entities.Type[S], update func(Change[S]) Update[R]) *View[S, R] {
	if entity == nil {
		return define[S, R](name, "", nil, update)
	}
	return define(name, entity.ComponentID(), entity.Decode, update)
}

// define defines a view over the changes of component type source, each
// change's data read with decode (a deletion's with revision 0 and no
// data).
func define[S, R any](name, source string, decode func(string, uint64, []byte) (S, error), update func(Change[S]) Update[R]) *View[S, R] {
	v := &View[S, R]{decode: decode, update: update}
	v.def = &viewDef{name: name, entityType: source, rowType: reflect.TypeFor[R](), project: v.project}
	return v
}

// Name is the view's name.
func (v *View[S, R]) Name() string { return v.def.name }

// Start adds the view to r, the service's views: it is built and kept up
// to date once r is started, each shard on the instance that serves it.
// It fails, naming the field, when a query uses a field the row does not
// have or cannot index, and when the store keeps no change log or a view
// of that name is started already.
func (v *View[S, R]) Start(r *Runner) error {
	if v.def.name == "" || v.def.entityType == "" || (v.decode == nil || v.update == nil) && v.fold == nil {
		return errors.New("views: a view needs a name, a source and an updater")
	}
	// One definition may be started on several runners (instances in one
	// process, in tests): it is compiled once, and read only after.
	v.compiled.Do(func() { v.compileErr = v.def.compile() })
	if v.compileErr != nil {
		return v.compileErr
	}
	return r.add(v.def)
}

// project maps one change to the operation on its row (row: the row
// before it, for a view over events); ok is false when the row is left
// as it is.
func (v *View[S, R]) project(c entities.Change, row []byte) (op rowOp, ok bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("view %s: the updater panicked: %v", v.def.name, p)
		}
	}()
	u, err := v.updateOf(c, row)
	if err != nil {
		return rowOp{}, false, fmt.Errorf("view %s: %w", v.def.name, err)
	}
	switch u.op {
	case opDelete:
		return rowOp{id: c.EntityID}, true, nil
	case opUpsert:
		data, err := json.Marshal(u.row)
		if err != nil {
			return rowOp{}, false, fmt.Errorf("view %s: encode the row of %s: %w", v.def.name, c.EntityID, err)
		}
		return rowOp{id: c.EntityID, row: data, keys: v.def.keys(c.EntityID, reflect.ValueOf(u.row))}, true, nil
	}
	return rowOp{}, false, nil
}

// updateOf is the updater's update for change c (row: the row before
// it, for a view over events).
func (v *View[S, R]) updateOf(c entities.Change, row []byte) (Update[R], error) {
	if v.fold != nil {
		return v.fold(c, row)
	}
	rev, data := c.Revision, c.Data
	if c.Deleted {
		rev, data = 0, nil
	}
	state, err := v.decode(c.EntityID, rev, data)
	if err != nil {
		return Update[R]{}, err
	}
	return v.update(Change[S]{EntityID: c.EntityID, State: state, Revision: c.Revision, Deleted: c.Deleted, At: c.At}), nil
}

// Version sets the view's version: change it whenever the updater
// changes what it makes of a change (a new field, another rule), so
// that the view is rebuilt (see Runner: a view whose version or queries
// changed is built anew from the entities' current states, while the old
// rows answer, then swapped in). Call it before Start.
func (v *View[S, R]) Version(version string) *View[S, R] {
	v.def.version = version
	return v
}

// viewDef is a view with its types erased, as the runner keeps it.
type viewDef struct {
	name    string
	version string
	// gen is the view's generation: its name and a fingerprint of its
	// version, entity type and queries, which its rows are kept under.
	gen        string
	entityType string
	// events: the view folds events into rows (DefineEvents): the
	// projector reads the rows before a batch, and builds from journals.
	events  bool
	rowType reflect.Type
	queries []*queryDef
	project func(c entities.Change, row []byte) (rowOp, bool, error)
}

// rowOp is what a change does to its entity's row: row nil removes it;
// keys are its index key in each query, in the view's order of queries.
type rowOp struct {
	id   string
	row  []byte
	keys []string
	// since is the change's position: where an index entry made now
	// enters the index.
	since uint64
}

// keys is the row's index key in each of the view's queries.
func (d *viewDef) keys(id string, row reflect.Value) []string {
	keys := make([]string, len(d.queries))
	for i, q := range d.queries {
		keys[i] = q.key(id, row)
	}
	return keys
}

// query is the view's query named name.
func (d *viewDef) query(name string) (int, *queryDef) {
	for i, q := range d.queries {
		if q.name == name {
			return i, q
		}
	}
	return -1, nil
}

// compile checks every query against the row type.
func (d *viewDef) compile() error {
	fields, not, err := rowFields(d.rowType)
	if err != nil {
		return fmt.Errorf("view %s: %w", d.name, err)
	}
	seen := make(map[string]bool)
	for _, q := range d.queries {
		if seen[q.name] {
			return fmt.Errorf("view %s: two queries named %q", d.name, q.name)
		}
		seen[q.name] = true
		if err := q.compile(fields, not); err != nil {
			return fmt.Errorf("view %s: query %s: %w", d.name, q.name, err)
		}
	}
	h := fnv.New64a()
	for _, part := range []string{d.version, d.entityType, d.rowType.String()} {
		_, _ = h.Write([]byte(part))
		_, _ = h.Write([]byte{0})
	}
	for _, q := range d.queries {
		_, _ = h.Write([]byte(q.fingerprint()))
		_, _ = h.Write([]byte{0})
	}
	d.gen = fmt.Sprintf("%s@%012x", d.name, h.Sum64()>>16)
	return nil
}
