package impl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/internal/slab"
	"github.com/trellis-go/trellis/delivery/internal/wirebytes"
	"github.com/trellis-go/trellis/runtime"
)

// The protocol's messages between controllers on two instances travel in
// a compact binary form: a tag byte, then unsigned varints, and strings
// and byte strings each after its length. The producer's message A is
// encoded by the codec the System has for A (runtime.CodecFor: JSON
// unless the application registered another). Refs travel as their
// runtime.RefAddress. The messages that must stay local (ProducerStart,
// ConsumerStart and the controllers' own) cannot be encoded.
//
// Both codecs are registered with a System (runtime.RegisterDefaultCodec)
// when a controller of A starts on it, so an application may register its
// own before.

// The tags of the encoded messages.
const (
	tagSequenced byte = 1 + iota
	tagRegisterTo
	tagDeliverThenStop
	tagRequest
	tagResend
	tagAck
	tagRegisterConsumer
)

// The flag bits of a SequencedMessage and a Request.
const (
	flagFirst byte = 1 << iota
	flagAck
	flagChunk
	flagChunkFirst
	flagChunkLast
	// flagTrace: the trace context follows the association (see
	// SequencedMessage.TraceContext); an untraced message has no byte of
	// it.
	flagTrace
	flagResent
)

const (
	flagSupportResend byte = 1 << iota
	flagViaTimeout
)

// errShort: a message ended before its fields did.
var errShort = errors.New("delivery: wire message cut short")

// RegisterCodecs gives sys the codecs of A's protocol messages, unless it
// has some already. A controller of A registers them as it starts; an
// instance whose first controller of A starts on a message from another
// instance (a sharded entity reached through a runtime.Placement, whose
// consumer controller the message starts) must register them before.
func RegisterCodecs[A any](sys *runtime.System) {
	runtime.RegisterDefaultCodec[ConsumerCommand[A]](sys, consumerCodec[A]{sys: sys, last: new(atomic.Pointer[origin[A]]),
		bodyLen: new(atomic.Int64), decoded: new(slab.Slab[SequencedMessage[A]])})
	runtime.RegisterDefaultCodec[ProducerCommand[A]](sys, producerCodec[A]{sys})
}

// consumerCodec encodes what a consumer controller takes from afar.
type consumerCodec[A any] struct {
	sys  *runtime.System
	last *atomic.Pointer[origin[A]] // of the last SequencedMessage decoded
	// bodyLen is the length of the last message encoded: the room an
	// encoding leaves for its message, which the codec then writes in
	// place (a longer one grows the buffer once). Past maxBodyRoom, a
	// large message does not make the next ones' buffers large.
	bodyLen *atomic.Int64
	// decoded holds the SequencedMessages decoded, which no one changes
	// once sent: a stream of them costs an allocation per slab.Size.
	decoded *slab.Slab[SequencedMessage[A]]
}

// maxBodyRoom bounds the room an encoding leaves for its message.
const maxBodyRoom = 4 << 10

// origin is where a SequencedMessage comes from: its producer id and
// producer controller. A stream comes from one producer controller, so the
// decoder keeps the last origin and reuses it while the next messages
// name the same, making none of its strings or its ref again.
type origin[A any] struct {
	producerID string
	ref        runtime.RefAddress
	pc         runtime.Ref[ProducerCommand[A]] // nil: resolved each time (a local ref, which may be unexposed)
}

// originOf returns the origin named by id, addr and path (parts of a
// message being decoded), the last one if it is the same.
func (c consumerCodec[A]) originOf(id, addr, path []byte) *origin[A] {
	if o := c.last.Load(); o != nil && string(id) == o.producerID && string(addr) == o.ref.Addr && string(path) == o.ref.Path {
		return o
	}
	o := &origin[A]{producerID: string(id), ref: runtime.RefAddress{Addr: string(addr), Path: string(path)}}
	if pc := runtime.ResolveRef[ProducerCommand[A]](c.sys, o.ref); isRemote(pc) {
		o.pc = pc // a remote ref is a value: it stays right
	}
	c.last.Store(o)
	return o
}

func isRemote(ref runtime.AnyRef) bool {
	_, ok := runtime.Address(ref)
	return ok
}

func (c consumerCodec[A]) Encode(msg ConsumerCommand[A]) ([]byte, error) {
	switch m := msg.(type) {
	case *SequencedMessage[A]:
		return c.encodeSequenced(m)
	case RegisterToProducerController[A]:
		a, err := runtime.AddressOf(c.sys, m.ProducerController)
		if err != nil {
			return nil, err
		}
		return appendRef([]byte{tagRegisterTo}, a), nil
	case DeliverThenStop[A]:
		return []byte{tagDeliverThenStop}, nil
	}
	return nil, fmt.Errorf("delivery: %T cannot go to another instance: it is local to its controller", msg)
}

func (c consumerCodec[A]) encodeSequenced(m *SequencedMessage[A]) ([]byte, error) {
	pc, err := runtime.AddressOf(c.sys, m.ProducerController)
	if err != nil {
		return nil, err
	}
	var flags byte
	if m.First {
		flags |= flagFirst
	}
	if m.Ack {
		flags |= flagAck
	}
	if m.TraceContext != "" {
		flags |= flagTrace
		if m.Resent {
			flags |= flagResent
		}
	}
	size := 48 + len(m.ProducerID) + len(pc.Addr) + len(pc.Path) + len(m.TraceContext)
	if m.Chunk != nil {
		flags |= flagChunk
		if m.Chunk.First {
			flags |= flagChunkFirst
		}
		if m.Chunk.Last {
			flags |= flagChunkLast
		}
		size += len(m.Chunk.Manifest) + len(m.Chunk.Data)
	} else {
		size += int(min(c.bodyLen.Load(), maxBodyRoom))
	}
	b := make([]byte, 0, size)
	b = append(b, tagSequenced, flags)
	b = wirebytes.AppendString(b, m.ProducerID)
	b = binary.AppendUvarint(b, uint64(m.SeqNr))
	b = appendRef(b, pc)
	b = binary.AppendUvarint(b, m.Incarnation)
	b = binary.AppendUvarint(b, m.Generation)
	b = binary.AppendUvarint(b, m.Association)
	if flags&flagTrace != 0 {
		b = wirebytes.AppendString(b, m.TraceContext)
	}
	if m.Chunk != nil {
		b = wirebytes.AppendString(b, m.Chunk.Manifest)
		return append(b, m.Chunk.Data...), nil
	}
	head := len(b)
	if b, err = runtime.AppendEncode(runtime.CodecFor[A](c.sys), b, m.Message); err != nil {
		return nil, fmt.Errorf("delivery: encode message %d of %q: %w", m.SeqNr, m.ProducerID, err)
	}
	c.bodyLen.Store(int64(len(b) - head))
	return b, nil
}

func (c consumerCodec[A]) Decode(data []byte) (ConsumerCommand[A], error) {
	r := wirebytes.Reader{B: data, Short: errShort}
	switch r.Byte() {
	case tagSequenced:
		return c.decodeSequenced(&r)
	case tagRegisterTo:
		a := readRef(&r)
		if r.Err != nil {
			return nil, fmt.Errorf("delivery: decode RegisterToProducerController: %w", r.Err)
		}
		return RegisterToProducerController[A]{ProducerController: runtime.ResolveRef[ProducerCommand[A]](c.sys, a)}, nil
	case tagDeliverThenStop:
		return DeliverThenStop[A]{}, nil
	}
	return nil, fmt.Errorf("delivery: not a consumer controller's message (%d bytes)", len(data))
}

func (c consumerCodec[A]) decodeSequenced(r *wirebytes.Reader) (ConsumerCommand[A], error) {
	flags := r.Byte()
	id, seqNr := r.Bytes(), r.Uvarint()
	addr, path := r.Bytes(), r.Bytes()
	m := c.decoded.Get()
	m.SeqNr = SeqNr(seqNr)
	m.Incarnation, m.Generation, m.Association = r.Uvarint(), r.Uvarint(), r.Uvarint()
	m.First, m.Ack = flags&flagFirst != 0, flags&flagAck != 0
	if flags&flagTrace != 0 {
		m.TraceContext, m.Resent = r.String(), flags&flagResent != 0
	}
	if flags&flagChunk != 0 {
		m.Chunk = &durable.Chunk{Manifest: r.String(), First: flags&flagChunkFirst != 0, Last: flags&flagChunkLast != 0}
		m.Chunk.Data = r.Rest()
	}
	if r.Err != nil {
		return nil, fmt.Errorf("delivery: decode SequencedMessage: %w", r.Err)
	}
	o := c.originOf(id, addr, path)
	m.ProducerID, m.ProducerController = o.producerID, o.pc
	if o.pc == nil {
		m.ProducerController = runtime.ResolveRef[ProducerCommand[A]](c.sys, o.ref)
	}
	if m.Chunk == nil {
		if err := runtime.DecodeInto(runtime.CodecFor[A](c.sys), r.Rest(), &m.Message); err != nil {
			return nil, fmt.Errorf("delivery: decode message %d of %q: %w", m.SeqNr, m.ProducerID, err)
		}
	}
	return m, nil
}

// producerCodec encodes what a producer controller takes from afar.
type producerCodec[A any] struct{ sys *runtime.System }

func (c producerCodec[A]) Encode(msg ProducerCommand[A]) ([]byte, error) {
	switch m := msg.(type) {
	case Request[A]:
		var flags byte
		if m.SupportResend {
			flags |= flagSupportResend
		}
		if m.ViaTimeout {
			flags |= flagViaTimeout
		}
		return wirebytes.AppendUvarints([]byte{tagRequest, flags}, uint64(m.ConfirmedSeqNr), uint64(m.RequestUpToSeqNr), m.Association), nil
	case Resend[A]:
		return wirebytes.AppendUvarints([]byte{tagResend}, uint64(m.FromSeqNr), m.Association), nil
	case *Ack[A]:
		return wirebytes.AppendUvarints([]byte{tagAck}, uint64(m.ConfirmedSeqNr), m.Association), nil
	case Ack[A]:
		return wirebytes.AppendUvarints([]byte{tagAck}, uint64(m.ConfirmedSeqNr), m.Association), nil
	case RegisterConsumer[A]:
		a, err := runtime.AddressOf(c.sys, m.ConsumerController)
		if err != nil {
			return nil, err
		}
		return binary.AppendUvarint(appendRef([]byte{tagRegisterConsumer}, a), m.registration), nil
	}
	return nil, fmt.Errorf("delivery: %T cannot go to another instance: it is local to its controller", msg)
}

func (c producerCodec[A]) Decode(data []byte) (ProducerCommand[A], error) {
	r := wirebytes.Reader{B: data, Short: errShort}
	var msg ProducerCommand[A]
	switch r.Byte() {
	case tagRequest:
		flags := r.Byte()
		msg = Request[A]{ConfirmedSeqNr: SeqNr(r.Uvarint()), RequestUpToSeqNr: SeqNr(r.Uvarint()), Association: r.Uvarint(),
			SupportResend: flags&flagSupportResend != 0, ViaTimeout: flags&flagViaTimeout != 0}
	case tagResend:
		msg = Resend[A]{FromSeqNr: SeqNr(r.Uvarint()), Association: r.Uvarint()}
	case tagAck:
		msg = &Ack[A]{ConfirmedSeqNr: SeqNr(r.Uvarint()), Association: r.Uvarint()}
	case tagRegisterConsumer:
		a := readRef(&r)
		reg := r.Uvarint()
		if r.Err == nil {
			msg = RegisterConsumer[A]{ConsumerController: runtime.ResolveRef[ConsumerCommand[A]](c.sys, a), registration: reg}
		}
	default:
		r.Fail()
	}
	if r.Err != nil {
		return nil, fmt.Errorf("delivery: not a producer controller's message (%d bytes): %w", len(data), r.Err)
	}
	return msg, nil
}

func appendRef(b []byte, a runtime.RefAddress) []byte {
	return wirebytes.AppendString(wirebytes.AppendString(b, a.Addr), a.Path)
}

func readRef(r *wirebytes.Reader) runtime.RefAddress {
	return runtime.RefAddress{Addr: r.String(), Path: r.String()}
}
