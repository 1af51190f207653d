package workflows

import (
	"encoding/json"
	"fmt"
)

// DecodeInstance reads data, a stored record of instance id of t (an
// entity change's data in the shard's change log), as the Instance it
// is; no data (nil) is an instance not started, of the empty state. A
// view over the workflow type reads its changes with it
// (views.DefineWorkflow).
func (t *Type[S]) DecodeInstance(id string, data []byte) (Instance[S], error) {
	var rec record
	if len(data) > 0 {
		if err := json.Unmarshal(data, &rec); err != nil {
			return Instance[S]{ID: id}, fmt.Errorf("workflow %s/%s: the stored record does not decode: %w", t.id, id, err)
		}
	}
	return t.instance(id, rec)
}

// instance is rec, the record of instance id, as an Instance.
func (t *Type[S]) instance(id string, rec record) (Instance[S], error) {
	state, err := t.decode(id, rec)
	if err != nil {
		return Instance[S]{ID: id}, err
	}
	return Instance[S]{ID: id, State: state, Status: rec.Status, Suspended: rec.Suspended, Step: rec.Step, Attempt: rec.Attempt, Transition: rec.Transition,
		NotBefore: rec.NotBefore, PauseUntil: rec.PauseUntil, Deadline: rec.Deadline, Error: rec.Error, History: rec.History}, nil
}
