package delivery

import (
	"github.com/trellis-go/trellis/delivery/internal/impl"
	"github.com/trellis-go/trellis/runtime"
)

// RegisterCodecs gives sys the codecs of A's protocol messages, unless it
// has some already. A controller of A registers them as it starts; an
// instance whose first controller of A starts on a message from another
// instance (a sharded entity reached through a runtime.Placement, whose
// consumer controller the message starts) must register them before.
func RegisterCodecs[A any](sys *runtime.System) { impl.RegisterCodecs[A](sys) }
