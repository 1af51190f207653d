package delivery

import "github.com/trellis-go/trellis/delivery/internal/impl"

// ErrProtocol is wrapped by the error with which a controller stops when
// its peer breaks the protocol, such as a producer that sends without a
// RequestNext.
var ErrProtocol = impl.ErrProtocol
