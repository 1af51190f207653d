package delivery

import "github.com/trellis-go/trellis/delivery/internal/impl"

// ErrChunk is wrapped by the errors of malformed chunks.
var ErrChunk = impl.ErrChunk
