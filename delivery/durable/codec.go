package durable

import (
	"encoding/json"
	"fmt"
)

// Codec turns messages of type A into bytes and back. Delivery uses one to
// chunk large messages (the producer controller encodes, the consumer
// controller decodes) and stores use one to persist whole messages.
// Implementations must be safe for concurrent use.
type Codec[A any] interface {
	// Manifest names the encoding; it travels with every chunk, so a
	// consumer can tell a message it cannot decode.
	Manifest() string
	Encode(msg A) ([]byte, error)
	Decode(data []byte) (A, error)
}

// JSON is the default Codec: encoding/json.
type JSON[A any] struct{}

// Manifest is "json".
func (JSON[A]) Manifest() string { return "json" }

// Encode marshals msg.
func (JSON[A]) Encode(msg A) ([]byte, error) {
	b, err := json.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("json encode %T: %w", msg, err)
	}
	return b, nil
}

// Decode unmarshals data.
func (JSON[A]) Decode(data []byte) (A, error) {
	var msg A
	if err := json.Unmarshal(data, &msg); err != nil {
		return msg, fmt.Errorf("json decode %T: %w", msg, err)
	}
	return msg, nil
}

var _ Codec[int] = JSON[int]{}
