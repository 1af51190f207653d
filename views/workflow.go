package views

// WorkflowSource is a workflow type (workflows.Type) as a view's source:
// its component id, and how a stored record of one of its instances
// reads as the instance (workflows.Instance: its state, status and step).
type WorkflowSource[I any] interface {
	ComponentID() string
	DecodeInstance(id string, record []byte) (I, error)
}

// DefineWorkflow defines a view named name over the instances of a
// workflow type: each instance has at most one row, which update sets
// from each change of the instance (a transition, a step's outcome, an
// operator's move; Change.State is the instance as stored after it,
// Change.Deleted its removal), in order. As for Define, update must be a
// pure function of the change, and the view is built from the
// instances' current records when it is new. A workflow's record is an
// entity's state, written with its change in the shard's change log, so
// the view sees what Define's see, when they see it.
func DefineWorkflow[I, R any](name string, source WorkflowSource[I], update func(Change[I]) Update[R]) *View[I, R] {
	if source == nil {
		return define[I, R](name, "", nil, update)
	}
	return define(name, source.ComponentID(), func(id string, _ uint64, data []byte) (I, error) {
		return source.DecodeInstance(id, data)
	}, update)
}
