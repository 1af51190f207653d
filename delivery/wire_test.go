package delivery_test

import (
	"reflect"
	"testing"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/internal/testkit/remotetest"
	"github.com/trellis-go/trellis/runtime"
)

type job = deliverytest.Job

// TestWireRoundTrip: every protocol message that may cross instances comes
// back from its encoding as it went, refs included; every cut-short
// encoding is refused with an error, and so are the local-only messages.
func TestWireRoundTrip(t *testing.T) {
	n := remotetest.NewNode(t, "wire", nil)
	pc, err := delivery.SpawnProducerController[job](n.Sys, "pc", "wire", delivery.ProducerSettings{})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := delivery.SpawnConsumerController[job](n.Sys, "cc", delivery.ConsumerSettings{})
	if err != nil {
		t.Fatal(err)
	}
	deliverytest.Eventually(t, "the controllers' codecs are registered", func() bool {
		_, ok := runtime.CodecFor[delivery.ProducerCommand[job]](n.Sys).(runtime.JSONCodec[delivery.ProducerCommand[job]])
		_, ok2 := runtime.CodecFor[delivery.ConsumerCommand[job]](n.Sys).(runtime.JSONCodec[delivery.ConsumerCommand[job]])
		return !ok && !ok2
	})
	toCC, toPC := runtime.CodecFor[delivery.ConsumerCommand[job]](n.Sys), runtime.CodecFor[delivery.ProducerCommand[job]](n.Sys)
	cases := []struct {
		name string
		msg  any
	}{
		{"sequenced", &delivery.SequencedMessage[job]{ProducerID: "p", SeqNr: 7, Message: job{N: 7, Pad: "x"}, First: true, Ack: true,
			ProducerController: pc, Incarnation: 1 << 60, Generation: 3, Association: 2}},
		{"sequenced chunk", &delivery.SequencedMessage[job]{ProducerID: "p", SeqNr: 8, ProducerController: pc, Incarnation: 9,
			Chunk: &delivery.ChunkedMessage{Data: []byte("{\"n\":"), First: true, Manifest: "json"}}},
		{"sequenced traced, resent", &delivery.SequencedMessage[job]{ProducerID: "p", SeqNr: 7, Message: job{N: 7}, ProducerController: pc,
			Incarnation: 1, TraceContext: traced, Resent: true}},
		{"sequenced chunk traced", &delivery.SequencedMessage[job]{ProducerID: "p", SeqNr: 8, ProducerController: pc, Incarnation: 9,
			Chunk: &delivery.ChunkedMessage{Data: []byte("{\"n\":"), First: true, Manifest: "json"}, TraceContext: traced + "\nk=v"}},
		{"register to", delivery.RegisterToProducerController[job]{ProducerController: pc}},
		{"deliver then stop", delivery.DeliverThenStop[job]{}},
		{"request", delivery.Request[job]{ConfirmedSeqNr: 3, RequestUpToSeqNr: 23, SupportResend: true, ViaTimeout: true, Association: 4}},
		{"resend", delivery.Resend[job]{FromSeqNr: 5, Association: 1}},
		{"ack", &delivery.Ack[job]{ConfirmedSeqNr: 9, Association: 2}},
		{"register consumer", delivery.RegisterConsumer[job]{ConsumerController: cc}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var enc []byte
			var decode func([]byte) (any, error)
			if m, ok := tc.msg.(delivery.ConsumerCommand[job]); ok {
				enc, err = toCC.Encode(m)
				decode = func(b []byte) (any, error) { return toCC.Decode(b) }
			} else {
				enc, err = toPC.Encode(tc.msg.(delivery.ProducerCommand[job]))
				decode = func(b []byte) (any, error) { return toPC.Decode(b) }
			}
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			got, err := decode(enc)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.msg) {
				t.Fatalf("round trip gave %+v, want %+v", got, tc.msg)
			}
			whole := len(enc) // a chunk's data is its bytes, whatever their length
			if m, ok := tc.msg.(*delivery.SequencedMessage[job]); ok && m.Chunk != nil {
				whole -= len(m.Chunk.Data)
			}
			for cut := range whole {
				if _, err := decode(enc[:cut]); err == nil {
					t.Fatalf("%d of %d bytes decoded without an error", cut, len(enc))
				}
			}
		})
	}
	for _, local := range []delivery.ConsumerCommand[job]{delivery.ConsumerStart[job]{}} {
		if _, err := toCC.Encode(local); err == nil {
			t.Fatalf("%T encoded: it must stay local", local)
		}
	}
	if _, err := toPC.Encode(delivery.ProducerStart[job]{}); err == nil {
		t.Fatal("ProducerStart encoded: it must stay local")
	}
	if _, err := toPC.Decode([]byte{99}); err == nil {
		t.Fatal("an unknown tag decoded")
	}
	// An untraced message carries no byte of tracing; a traced one its
	// context and its length.
	plain := &delivery.SequencedMessage[job]{ProducerID: "p", SeqNr: 7, Message: job{N: 7}, ProducerController: pc, Incarnation: 1}
	withTrace := *plain
	withTrace.TraceContext = traced
	a, errA := toCC.Encode(plain)
	b, errB := toCC.Encode(&withTrace)
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	if len(b)-len(a) != 1+len(traced) {
		t.Fatalf("untraced %d bytes, traced %d: want the difference to be the context and its length", len(a), len(b))
	}
}

// traced is a W3C traceparent, as a traced message carries it.
const traced = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
