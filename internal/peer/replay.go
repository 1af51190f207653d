package peer

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"
)

// DefaultReplayMemory is how many accepted requests a server remembers
// at most to refuse their replays (see ServerConfig.ReplayMemory): about
// 6 MiB when full.
const DefaultReplayMemory = 1 << 17

// errReplayed is why a request whose signature was accepted before is
// refused.
var errReplayed = errors.New("a replay: a request with this signature was accepted before, within the time window")

// replayGuard remembers the signature of every request the server
// accepted (the opening of a call or tell stream, a forward of its own)
// for as long as its timestamp is within the window, and refuses a
// request whose signature it has seen: a request captured on the wire and
// sent again is refused whenever it comes, since after the window its
// timestamp is. Every genuine request's signature is its own, its URI or
// timestamp or content being (a stream's URI names its client and its
// number), so the signature is the request's nonce.
//
// The signatures are kept by the second of their request's timestamp, so
// a second's worth leaves at once when it is out of the window; at most
// max are kept, past which admit refuses (fail closed) until some leave.
// Only requests whose signature checked are admitted: a stranger cannot
// fill it.
type replayGuard struct {
	window time.Duration
	max    int

	mu      sync.Mutex
	n       int
	buckets map[int64]map[[sha256.Size]byte]struct{} // by the timestamp's Unix second
}

func newReplayGuard(window time.Duration, max int) *replayGuard {
	return &replayGuard{window: window, max: max, buckets: map[int64]map[[sha256.Size]byte]struct{}{}}
}

// errReplayFull is why admit refuses a request it has no room to
// remember.
type errReplayFull struct{ max int }

func (e errReplayFull) Error() string {
	return fmt.Sprintf("%d requests accepted within the time window, the most remembered to refuse replays (ReplayMemory): try again", e.max)
}

// admit records the signature sig of a request stamped unixMilli (both
// checked already) and returns nil, or errReplayed if it was recorded
// before, or errReplayFull when there is no room. now is the server's
// clock.
func (g *replayGuard) admit(unixMilli int64, sig string, now time.Time) error {
	var key [sha256.Size]byte
	if n, err := base64.RawURLEncoding.Decode(key[:], []byte(sig)); err != nil || n != len(key) {
		return errors.New("malformed signature") // checked already: not reached
	}
	sec := floorDiv(unixMilli, 1000)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.expire(now)
	b := g.buckets[sec]
	if _, seen := b[key]; seen {
		return errReplayed
	}
	if g.n >= g.max {
		return errReplayFull{g.max}
	}
	if b == nil {
		b = map[[sha256.Size]byte]struct{}{}
		g.buckets[sec] = b
	}
	b[key] = struct{}{}
	g.n++
	return nil
}

// expire drops the seconds whose every timestamp is older than the
// window, which checkTime refuses anyway. There are at most about two
// windows' worth of seconds (a timestamp may be ahead of the clock too).
func (g *replayGuard) expire(now time.Time) {
	oldest := now.Add(-g.window).UnixMilli() // the oldest timestamp still accepted
	for sec, b := range g.buckets {
		if (sec+1)*1000 <= oldest {
			g.n -= len(b)
			delete(g.buckets, sec)
		}
	}
}

// floorDiv is a / b rounded down, for a timestamp before 1970 too.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
