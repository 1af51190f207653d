package peer

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// rawCalls is a call stream opened by hand, for lines the tests build.
type rawCalls struct {
	sg   *signer
	sig  string // the stream's request signature
	body *io.PipeWriter
	resp *http.Response
}

// rawStreams numbers the streams openRawCalls opens.
var rawStreams atomic.Uint64

// openRawCalls opens a call stream to addr, signed with the test secret.
func openRawCalls(t *testing.T, addr string) *rawCalls {
	t.Helper()
	sg, err := newSigner(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	uri := callsPath + "?client=test&stream=" + strconv.FormatUint(rawStreams.Add(1), 10) + "&max_reply=1024"
	ts := strconv.FormatInt(time.Now().UnixMilli(), 10)
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(within(t, 5*time.Second), http.MethodPost, "http://"+addr+uri, pr)
	if err != nil {
		t.Fatal(err)
	}
	sig := sg.signRequest(http.MethodPost, uri, ts, "", nil)
	req.Header.Set(headerTime, ts)
	req.Header.Set(headerSignature, sig)
	resp, err := h2c(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pw.Close(); resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("opening a call stream: %d", resp.StatusCode)
	}
	return &rawCalls{sg: sg, sig: sig, body: pw, resp: resp}
}

// call is a genuine call line of this stream.
func (r *rawCalls) call(seq uint64, arg string) callLine {
	l := callLine{Seq: seq, Path: forwardPrefix + "c/m/e", Timeout: "5s", Arg: []byte(arg)}
	l.Sig = r.sg.signCall(r.sig, &l)
	return l
}

// send writes the lines, ends the body and returns every line the server
// answered, checking each one's signature.
func (r *rawCalls) send(t *testing.T, lines ...callLine) []replyLine {
	t.Helper()
	go func() {
		for _, l := range lines {
			if _, err := r.body.Write(append(mustJSON(l), '\n')); err != nil {
				return
			}
		}
		r.body.Close()
	}()
	sigs := map[uint64]string{}
	for _, l := range lines {
		sigs[l.Seq] = l.Sig
	}
	var got []replyLine
	sc := bufio.NewScanner(r.resp.Body)
	for sc.Scan() {
		var l replyLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("reply line %q: %v", sc.Bytes(), err)
		}
		if !equal(l.Sig, r.sg.signReplyLine(r.sig, sigs[l.Seq], &l)) {
			t.Fatalf("reply line %q: bad signature", sc.Bytes())
		}
		got = append(got, l)
	}
	return got
}

// TestCallStreamRefusesBadLines: a line that is forged, altered, replayed,
// out of order, or taken from another stream ends the stream with an end
// line (naming the last line read) and runs nothing; the genuine lines
// before it run and are answered, each reply signed and bound to its
// call.
func TestCallStreamRefusesBadLines(t *testing.T) {
	var calls atomic.Int32
	s := startServer(t, ServerConfig{Handler: countingEcho(&calls)}, &logBuffer{}, nil)
	other, err := newSigner([]byte("another-cluster-secret-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		lines   func(r, elsewhere *rawCalls) []callLine
		calls   int32
		replies int    // reply lines for genuine calls
		endSeq  uint64 // the end line's: the last line read; -1 none
		end     bool
	}{
		{"genuine", func(r, _ *rawCalls) []callLine { return []callLine{r.call(1, `1`), r.call(2, `2`)} }, 2, 2, 0, false},
		{"forged", func(r, _ *rawCalls) []callLine {
			l := r.call(1, `1`)
			l.Sig = other.signCall(r.sig, &l)
			return []callLine{l}
		}, 0, 0, 0, true},
		{"altered argument", func(r, _ *rawCalls) []callLine {
			l := r.call(1, `1`)
			l.Arg = []byte(`666`)
			return []callLine{l}
		}, 0, 0, 0, true},
		{"replayed", func(r, _ *rawCalls) []callLine { l := r.call(1, `1`); return []callLine{l, l} }, 1, 1, 1, true},
		{"reordered", func(r, _ *rawCalls) []callLine { return []callLine{r.call(2, `2`), r.call(1, `1`)} }, 0, 0, 0, true},
		{"from another stream", func(_, elsewhere *rawCalls) []callLine { return []callLine{elsewhere.call(1, `1`)} }, 0, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls.Store(0)
			r, elsewhere := openRawCalls(t, s.Addr()), openRawCalls(t, s.Addr())
			got := r.send(t, tc.lines(r, elsewhere)...)
			var replies, ends int
			for _, l := range got {
				switch {
				case l.End:
					ends++
					if l.Seq != tc.endSeq || l.Status != http.StatusUnauthorized {
						t.Errorf("end line at %d, status %d; want at %d, 401", l.Seq, l.Status, tc.endSeq)
					}
				case l.Status == http.StatusOK:
					replies++
				default:
					t.Errorf("reply %d: status %d %s", l.Seq, l.Status, l.Body)
				}
			}
			if replies != tc.replies || (ends == 1) != tc.end || ends > 1 {
				t.Errorf("%d replies and %d end lines, want %d and end %v", replies, ends, tc.replies, tc.end)
			}
			if calls.Load() != tc.calls {
				t.Errorf("the handler ran %d times, want %d", calls.Load(), tc.calls)
			}
		})
	}
}
