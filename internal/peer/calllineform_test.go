package peer

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// A signature as the peers make them (base64url of a SHA-256).
const lineTestSig = "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_AbCdE"

// lineCase is a line, and whether its appender takes it (else
// encoding/json must write it).
type lineCase[T any] struct {
	line  T
	plain bool
}

// callLineCases are call lines of every shape.
var callLineCases = []lineCase[callLine]{
	{callLine{Seq: 1, Path: forwardPrefix + "orders/Place/order-42", Timeout: "4.999s",
		Trace: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", Arg: []byte(`{"n":1}`), Sig: lineTestSig}, true},
	{callLine{Seq: 9, Cancel: 3, Sig: lineTestSig}, true}, // a cancel line
	{callLine{}, true}, // every field empty
	{callLine{Seq: 2, Path: "p", Arg: []byte{}, Sig: "s"}, true},                               // an empty argument: omitted, as nil
	{callLine{Seq: 2, Path: "p", Arg: nil, Sig: "s"}, true},                                    // no argument
	{callLine{Seq: 2, Arg: []byte{0, 1, 2, 0xfe, 0xff, '\n', '"'}, Sig: "s"}, true},            // binary, padded twice
	{callLine{Seq: 2, Arg: []byte{1, 2}, Sig: "s"}, true},                                      // padded once
	{callLine{Seq: math.MaxUint64, Cancel: math.MaxUint64, Sig: lineTestSig}, true},            // the largest seq
	{callLine{Seq: 3, Path: forwardPrefix + "c/m/a%2Fb%20c", Timeout: "1m0s", Sig: "s"}, true}, // a path escaped
	{callLine{Seq: 3, Trace: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\nvendor=a,b=c", Sig: "s"}, false},
	{callLine{Seq: 3, Trace: `say "hi"`, Sig: "s"}, false},
	{callLine{Seq: 3, Trace: `back\slash`, Sig: "s"}, false},
	{callLine{Seq: 3, Path: forwardPrefix + "c/m/a&b", Sig: "s"}, false}, // HTML-escaped by encoding/json
	{callLine{Seq: 3, Path: forwardPrefix + "c/m/<b>", Sig: "s"}, false},
	{callLine{Seq: 3, Path: forwardPrefix + "c/m/ünï", Sig: "s"}, false},
	{callLine{Seq: 3, Timeout: "tab\there", Sig: "s"}, false},
	{callLine{Seq: 3, Path: "p", Sig: "bad\x7f"}, false},
}

// replyLineCases are reply lines of every shape.
var replyLineCases = []lineCase[replyLine]{
	{replyLine{Seq: 1, Status: 200, Body: []byte(`{"ok":true}`), Sig: lineTestSig}, true},
	{replyLine{Seq: 7, End: true, Status: 503, Body: []byte(`{"kind":"unavailable","message":"shutting down"}`), Sig: lineTestSig}, true},
	{replyLine{Seq: 0, End: true, Status: 401, Body: []byte(`{}`), Sig: lineTestSig}, true}, // an end line before any call
	{replyLine{}, true}, // every field empty: a null body
	{replyLine{Seq: 1, Status: 200, Body: []byte{}, Sig: "s"}, true}, // an empty body is "", not null
	{replyLine{Seq: 1, Status: -1, Body: []byte{0xff}, Sig: "s"}, true},
	{replyLine{Seq: math.MaxUint64, Status: math.MaxInt, Body: []byte("xy"), Sig: lineTestSig}, true},
	{replyLine{Seq: 1, Status: math.MinInt, Body: []byte("xyz"), Sig: lineTestSig}, true},
	{replyLine{Seq: 1, Status: 200, Body: []byte("1"), Sig: `a"b`}, false},
	{replyLine{Seq: 1, Status: 200, Body: []byte("1"), Sig: "a&b"}, false},
}

// randomCallLines is n random call lines, their strings now and then
// in need of escapes.
func randomCallLines(rng *rand.Rand, n int) []callLine {
	var lines []callLine
	for range n {
		lines = append(lines, callLine{Seq: rng.Uint64() >> rng.IntN(64), Cancel: rng.Uint64() >> rng.IntN(65) * uint64(rng.IntN(2)),
			Path: randomString(rng), Timeout: randomString(rng), Trace: randomString(rng), Arg: randomBytes(rng), Sig: randomString(rng)})
	}
	return lines
}

// randomReplyLines is randomCallLines for reply lines.
func randomReplyLines(rng *rand.Rand, n int) []replyLine {
	var lines []replyLine
	for range n {
		lines = append(lines, replyLine{Seq: rng.Uint64() >> rng.IntN(64), End: rng.IntN(2) == 0,
			Status: int(rng.Int64()>>rng.IntN(64)) * (1 - 2*rng.IntN(2)), Body: randomBytes(rng), Sig: randomString(rng)})
	}
	return lines
}

// randomString is empty, plain or (now and then) in need of escapes.
func randomString(rng *rand.Rand) string {
	const plain = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./%=+ ,;:'!?()[]{}|~`$*@#^"
	special := []string{"\n", `"`, `\`, "<", ">", "&", "\x01", "\x7f", "é"}
	var s strings.Builder
	for range rng.IntN(3) * rng.IntN(12) {
		if rng.IntN(40) == 0 {
			s.WriteString(special[rng.IntN(len(special))])
		} else {
			s.WriteByte(plain[rng.IntN(len(plain))])
		}
	}
	return s.String()
}

// randomBytes is nil, empty or random.
func randomBytes(rng *rand.Rand) []byte {
	switch rng.IntN(4) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	b := make([]byte, rng.IntN(40))
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	return b
}

// encodeJSON is what an encoding/json Encoder writes for v.
func encodeJSON(t testing.TB, v any) []byte {
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// lineForm is a kind of line's appender and fast parser.
type lineForm[T any] struct {
	append func([]byte, *T) ([]byte, bool)
	plain  func([]byte) (T, bool)
}

var (
	callForm  = lineForm[callLine]{appendCallLine, plainCallLine}
	replyForm = lineForm[replyLine]{appendReplyLine, plainReplyLine}
)

// matchesJSON checks that the appender writes what an encoding/json
// Encoder writes for each line (the cases', then the random ones), byte
// for byte, or declines, leaving b as it was (as each case says), and
// that parseLine reads back what either wrote as json.Unmarshal does:
// the line written, as written adjusts it (omitempty fields).
func (f lineForm[T]) matchesJSON(t *testing.T, cases []lineCase[T], random []T, written func(*T)) {
	t.Helper()
	var lines []T
	plain := map[int]bool{}
	for i, c := range cases {
		lines = append(lines, c.line)
		plain[i] = c.plain
	}
	lines = append(lines, random...)
	took := 0
	for i, line := range lines {
		want := encodeJSON(t, &line)
		got, ok := f.append([]byte("prefix"), &line)
		if c, isCase := plain[i]; isCase && ok != c {
			t.Errorf("the appender took %q %v, want %v", want, ok, c)
		}
		if ok {
			took++
			if !bytes.Equal(got, append([]byte("prefix"), want...)) {
				t.Fatalf("the appender wrote %q, encoding/json %q", got, want)
			}
		} else if string(got) != "prefix" {
			t.Fatalf("the appender declined %q but changed b to %q", want, got)
		}
		data := bytes.TrimSuffix(want, []byte("\n"))
		var back, slow T
		if err := parseLine(data, &back, f.plain); err != nil {
			t.Fatalf("parse %q: %v", data, err)
		}
		if err := json.Unmarshal(data, &slow); err != nil {
			t.Fatal(err)
		}
		if _, fast := f.plain(data); fast != ok {
			t.Errorf("%q: read by the fast path %v, written by it %v", data, fast, ok)
		}
		written(&line)
		if !reflect.DeepEqual(back, line) || !reflect.DeepEqual(back, slow) {
			t.Fatalf("parsed %+v from %q, wrote %+v, encoding/json read %+v", back, data, line, slow)
		}
	}
	if took < len(lines)/2 {
		t.Fatalf("only %d of %d lines written without encoding/json", took, len(lines))
	}
}

// readsAsJSON checks that parseLine gives json.Unmarshal's line and
// error for data, whatever it is, and that the fast path reads only what
// json.Unmarshal reads, as it reads it.
func (f lineForm[T]) readsAsJSON(t *testing.T, data []byte) (T, error) {
	t.Helper()
	var got, want T
	err := parseLine(data, &got, f.plain)
	wantErr := json.Unmarshal(data, &want)
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(err, wantErr) {
		t.Fatalf("%q: parsed %+v (%v), encoding/json %+v (%v)", data, got, err, want, wantErr)
	}
	if fast, ok := f.plain(data); ok && (wantErr != nil || !reflect.DeepEqual(fast, want)) {
		t.Fatalf("%q: the fast path read %+v, encoding/json %+v (%v)", data, fast, want, wantErr)
	}
	return want, wantErr
}

// fuzz is readsAsJSON, and checks that a line read is written back by the
// appender as encoding/json writes it (when it takes it).
func (f lineForm[T]) fuzz(t *testing.T, data []byte) {
	l, err := f.readsAsJSON(t, data)
	if err != nil {
		return
	}
	if b, ok := f.append(nil, &l); ok && !bytes.Equal(b, encodeJSON(t, &l)) {
		t.Fatalf("the appender wrote %q, encoding/json %q", b, encodeJSON(t, &l))
	}
}

// TestCallLineMatchesJSON: matchesJSON for call lines; an empty argument
// reads back as none.
func TestCallLineMatchesJSON(t *testing.T) {
	callForm.matchesJSON(t, callLineCases, randomCallLines(rand.New(rand.NewPCG(1, 2)), 500), func(l *callLine) {
		if len(l.Arg) == 0 {
			l.Arg = nil // omitempty
		}
	})
}

// TestReplyLineMatchesJSON: matchesJSON for reply lines, whose body keeps
// nil (null) and empty ("") apart.
func TestReplyLineMatchesJSON(t *testing.T) {
	replyForm.matchesJSON(t, replyLineCases, randomReplyLines(rand.New(rand.NewPCG(3, 4)), 500), func(*replyLine) {})
}

// TestLinesOtherJSON: the parsers read JSON in other forms than the
// appenders' (reordered, spaced, escaped, fields the writer omits) as
// json.Unmarshal does, and refuse what it refuses, with its error.
func TestLinesOtherJSON(t *testing.T) {
	for _, data := range []string{
		` {"seq":1,"sig":"s"}`,
		`{"sig":"s","seq":1}`,
		`{"seq":1,"path":"\u0070","sig":"s"}`,
		`{"seq":1,"cancel":0,"path":"","timeout":"","trace":"","arg":"","sig":"s"}`,
		`{"seq":1,"arg":null,"sig":"s"}`,
		`{"seq":1,"arg":"MQ==","sig":"s","extra":1}`,
		`{"seq":1,"arg":"M\r\nQ==","sig":"s"}`,
		`{"seq":01,"sig":"s"}`,
		`{"seq":-1,"sig":"s"}`,
		`{"seq":18446744073709551616,"sig":"s"}`,
		`{"seq":1,"arg":"M!==","sig":"s"}`,
		`{"seq":1,"sig":"s"}x`,
		`{"seq":1,"sig":"s"`,
		`{"seq":1,"sig":"\xff"}`,
	} {
		callForm.readsAsJSON(t, []byte(data))
	}
	for _, data := range []string{
		`{"seq":1,"end":false,"status":200,"body":"","sig":"s"}`,
		`{"seq":1,"status":-0,"body":null,"sig":"s"}`,
		`{"seq":1,"status":2e2,"body":null,"sig":"s"}`,
		`{"seq":1,"status":200,"sig":"s"}`,
		`{"seq":1,"status":-,"body":null,"sig":"s"}`,
		`{"seq":1,"status":99999999999999999999,"body":null,"sig":"s"}`,
		`{"seq":1,"status":200,"body":"MQ=","sig":"s"}`,
	} {
		replyForm.readsAsJSON(t, []byte(data))
	}
}

// FuzzCallLine: whatever the bytes, parseLine gives json.Unmarshal's
// call line and error, the fast path reads only what json.Unmarshal reads
// as it reads it, nothing panics, and a line read is written back by
// appendCallLine as encoding/json writes it (when it takes it).
func FuzzCallLine(f *testing.F) {
	for _, c := range callLineCases {
		f.Add(bytes.TrimSuffix(encodeJSON(f, &c.line), []byte("\n")))
	}
	f.Add([]byte(`{"seq":1,"arg":"M\rQ==","sig":"s"}`))
	f.Fuzz(callForm.fuzz)
}

// FuzzReplyLine is FuzzCallLine for reply lines.
func FuzzReplyLine(f *testing.F) {
	for _, c := range replyLineCases {
		f.Add(bytes.TrimSuffix(encodeJSON(f, &c.line), []byte("\n")))
	}
	f.Add([]byte(`{"seq":1,"status":-0,"body":"` + strings.Repeat("QUJD", 3) + `","sig":"s"}`))
	f.Fuzz(replyForm.fuzz)
}
