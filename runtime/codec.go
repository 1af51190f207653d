package runtime

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// Codec turns messages of type T into bytes and back, for refs to actors
// of other instances (see [RemoteRef]).
type Codec[T any] interface {
	Encode(msg T) ([]byte, error)
	Decode(data []byte) (T, error)
}

// JSONCodec is the default Codec: encoding/json. It cannot carry refs
// (interfaces); a message that holds one needs a codec of its own that
// writes the ref's [RefAddress].
type JSONCodec[T any] struct{}

// Encode is json.Marshal.
func (JSONCodec[T]) Encode(msg T) ([]byte, error) { return json.Marshal(msg) }

// Decode is json.Unmarshal into a new T.
func (JSONCodec[T]) Decode(data []byte) (T, error) {
	var msg T
	err := json.Unmarshal(data, &msg)
	return msg, err
}

// RegisterCodec sets the codec of the messages of type T that sys sends to
// and receives from other instances; without one they travel as JSON.
// Register before the first such message; registering again replaces the
// codec.
func RegisterCodec[T any](sys *System, c Codec[T]) {
	sys.codecs.Store(reflect.TypeFor[T](), c)
}

// CodecFor is the codec sys uses for messages of type T: the registered
// one, or JSONCodec.
func CodecFor[T any](sys *System) Codec[T] {
	if c, ok := sys.codecs.Load(reflect.TypeFor[T]()); ok {
		return c.(Codec[T])
	}
	return JSONCodec[T]{}
}

// RegisterDefaultCodec is RegisterCodec unless a codec for T is already
// registered: how a package sets the codec of its own message types while
// leaving the application the last word.
func RegisterDefaultCodec[T any](sys *System, c Codec[T]) {
	sys.codecs.LoadOrStore(reflect.TypeFor[T](), c)
}

// codecError wraps a codec's error with the operation and the type.
func codecError[T any](op string, err error) error {
	return fmt.Errorf("runtime: %s %v: %w", op, reflect.TypeFor[T](), err)
}
