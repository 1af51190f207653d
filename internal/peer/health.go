package peer

import (
	"net/http"
	"time"
)

// Health is the HTTP/2 health check of a peer connection: after Idle
// without a frame from the other side, a PING is sent, and the connection
// is closed when no answer comes within Timeout. It is what finds a
// blackholed peer (a connection that carries nothing, without a reset)
// and makes the next call dial again; a call in flight on it still ends
// by its own deadline.
type Health struct {
	Idle    time.Duration // default 5 s
	Timeout time.Duration // default 5 s
}

// DefaultHealth is the health check of zero fields: a dead connection is
// found within 10 s of its last frame.
var DefaultHealth = Health{Idle: 5 * time.Second, Timeout: 5 * time.Second}

func (h Health) withDefaults() Health {
	return Health{Idle: positiveOr(h.Idle, DefaultHealth.Idle), Timeout: positiveOr(h.Timeout, DefaultHealth.Timeout)}
}

// http2Config is the health check as net/http's HTTP/2 settings, with
// header compression that indexes nothing (see noHeaderIndexing).
func (h Health) http2Config() *http.HTTP2Config {
	return &http.HTTP2Config{SendPingTimeout: h.Idle, PingTimeout: h.Timeout, MaxEncoderHeaderTableSize: noHeaderIndexing}
}

// noHeaderIndexing is the size of the table in which each side's HPACK
// encoder keeps the headers it sent, to send them again as an index: too
// small for any header, so none is kept. Every call's signature and time
// are new values, and with the default table (4 KiB) each went into it
// and pushed the oldest out, which cost more CPU than the bytes it saved
// on the connection between two instances.
const noHeaderIndexing = 1
