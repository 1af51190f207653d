package impl

import (
	"errors"
	"fmt"
)

// Chunking: with ProducerSettings.ChunkLargeMessages = n > 0 the producer
// controller serializes every message and sends it as ceil(len/n) chunks
// (one, for a short message), each with its own sequence number, so a
// large message neither blocks the flow nor needs the window to itself. The
// consumer controller takes each chunk in turn, joins them and delivers the
// message once, with the last chunk's sequence number; only then is it
// confirmed, so a consumer controller that replaces another gets whole
// messages again.

// ErrChunk is wrapped by the errors of malformed chunks.
var ErrChunk = errors.New("delivery: bad chunk")

// chunkMessage serializes msg and splits it into pieces of at most size
// bytes, as SequencedMessages whose numbering the controller fills in. The
// pieces are allocated together: a message costs a few allocations, not a
// few per chunk.
func chunkMessage[A any](codec Codec[A], msg A, size int) ([]*SequencedMessage[A], error) {
	data, err := codec.Encode(msg)
	if err != nil {
		return nil, fmt.Errorf("encode with codec %q: %w", codec.Manifest(), err)
	}
	n := max(1, (len(data)+size-1)/size)
	msgs := make([]SequencedMessage[A], n)
	chunks := make([]ChunkedMessage, n)
	out := make([]*SequencedMessage[A], n)
	manifest := codec.Manifest()
	for i := range n {
		chunks[i] = ChunkedMessage{
			Data:     data[i*size : min((i+1)*size, len(data)) : min((i+1)*size, len(data))],
			First:    i == 0,
			Last:     i == n-1,
			Manifest: manifest,
		}
		msgs[i].Chunk = &chunks[i]
		out[i] = &msgs[i]
	}
	return out, nil
}

// assembly joins the chunks of one message on the consumer side.
type assembly struct {
	data     []byte
	started  bool
	last     SeqNr // the sequence number of the last chunk joined
	manifest string
	first    bool // the message began an association
}

// add takes chunk c, number seqNr. It returns false when c does not
// continue the message being joined (a chunk before it was lost, which
// happens only without resending): the partial message is dropped.
func (a *assembly) add(c *ChunkedMessage, seqNr SeqNr, first bool) bool {
	if c.First {
		a.data, a.started, a.manifest, a.first = a.data[:0], true, c.Manifest, first
	} else if !a.started || seqNr != a.last+1 || c.Manifest != a.manifest {
		a.reset()
		return false
	}
	a.last = seqNr
	a.data = append(a.data, c.Data...)
	return true
}

func (a *assembly) reset() {
	if cap(a.data) > 64<<10 {
		a.data = nil // do not hold on to the buffer of one huge message
	}
	a.data, a.started, a.last, a.manifest, a.first = a.data[:0], false, 0, "", false
}

// decode returns the joined message and resets the assembly.
func decodeChunks[A any](a *assembly, codec Codec[A]) (A, error) {
	defer a.reset()
	var zero A
	if a.manifest != codec.Manifest() {
		return zero, fmt.Errorf("%w: manifest %q, but the consumer controller's codec is %q", ErrChunk, a.manifest, codec.Manifest())
	}
	msg, err := codec.Decode(a.data)
	if err != nil {
		return zero, fmt.Errorf("decode %d bytes with codec %q: %w", len(a.data), codec.Manifest(), err)
	}
	return msg, nil
}
