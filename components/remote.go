package components

import (
	"encoding/json"
	"fmt"
)

// RemoteReply is the reply of a command that ran on another instance of a
// cluster: its JSON, as the owner encoded it. A Component's Invoke returns
// it in place of the typed reply it would have made here; the typed handles
// decode it into their reply type, and InvokeJSON passes it through as is.
type RemoteReply json.RawMessage

// MarshalJSON is the reply's JSON itself ("null" when empty).
func (r RemoteReply) MarshalJSON() ([]byte, error) {
	if len(r) == 0 {
		return []byte("null"), nil
	}
	return r, nil
}

// decodeReply is reply as an R: a RemoteReply decoded, or the typed reply
// of a local call.
func decodeReply[R any](reply any, componentID, method string) (R, error) {
	var r R
	if remote, ok := reply.(RemoteReply); ok {
		if err := json.Unmarshal(remote, &r); err != nil {
			return r, fmt.Errorf("invoke %s.%s: decode the forwarded reply into %T: %w", componentID, method, r, err)
		}
		return r, nil
	}
	r, ok := reply.(R)
	if !ok && reply != nil {
		return r, fmt.Errorf("invoke %s.%s: reply is %T, the handle expects %T", componentID, method, reply, r)
	}
	return r, nil
}
