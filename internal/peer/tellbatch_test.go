package peer

import (
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// signedBatches makes the lines of a stream whose request signature is
// streamSig, told to "a" with messages "1", "2", ..., as a sender writes
// them: each batch (its size in sizes) signed on its last line.
func signedBatches(sg *signer, streamSig string, sizes ...int) []tellLine {
	mac := sg.newTellMAC(streamSig)
	defer mac.release()
	var lines []tellLine
	for _, n := range sizes {
		for i := range n {
			seq := uint64(len(lines) + 1)
			line := tellLine{Seq: seq, To: "a", Msg: []byte(strconv.FormatUint(seq, 10))}
			mac.add(line.Seq, line.To, line.Msg)
			if i == n-1 {
				line.Sig = string(mac.appendSum(nil))
			}
			lines = append(lines, line)
		}
	}
	return lines
}

// renumber gives lines the seqs 1, 2, ... in their order, as a forger who
// drops or moves a line and hides it from the seq check would.
func renumber(lines []tellLine) []tellLine {
	for i := range lines {
		lines[i].Seq = uint64(i + 1)
	}
	return lines
}

// TestTellBatchesChecked: on a genuine stream, the server delivers a
// batch's lines only once the signature on its last line checks; a line
// forged, dropped, reordered or replayed, within a batch or across them,
// ends the stream with nothing of its batch delivered, and the batches
// before it were.
func TestTellBatchesChecked(t *testing.T) {
	s, got := receiving(t, &logBuffer{})
	sg, _ := newSigner(testSecret)
	for i, tc := range []struct {
		name   string
		sizes  []int                         // the batches the sender signs
		tamper func(l []tellLine) []tellLine // what a forger does to them
		want   []string                      // the messages delivered
		end    string                        // in the stream's end, "" for none
	}{
		{"genuine", []int{1, 3, 2}, nil, []string{"1", "2", "3", "4", "5", "6"}, ""},
		{"forged line within a batch", []int{1, 3}, func(l []tellLine) []tellLine {
			l[2].Msg = []byte("forged")
			return l
		}, []string{"1"}, `"kind":"unauthorized"`},
		{"forged path within a batch", []int{1, 3}, func(l []tellLine) []tellLine {
			l[1].To = "b"
			return l
		}, []string{"1"}, `"kind":"unauthorized"`},
		{"bad signature", []int{1, 1}, func(l []tellLine) []tellLine {
			l[1].Sig = strings.Repeat("A", signatureLen)
			return l
		}, []string{"1"}, `"kind":"unauthorized"`},
		{"dropped line", []int{1, 3}, func(l []tellLine) []tellLine {
			return slices.Delete(l, 2, 3)
		}, []string{"1"}, `"kind":"unauthorized"`},
		{"dropped line, renumbered", []int{1, 3}, func(l []tellLine) []tellLine {
			return renumber(slices.Delete(l, 2, 3))
		}, []string{"1"}, `"kind":"unauthorized"`},
		{"dropped signed line", []int{2, 2}, func(l []tellLine) []tellLine {
			l[2].Sig = l[3].Sig
			return l[:3]
		}, []string{"1", "2"}, `"kind":"unauthorized"`},
		{"reordered batch", []int{1, 3}, func(l []tellLine) []tellLine {
			l[1], l[2] = l[2], l[1]
			return l
		}, []string{"1"}, `"kind":"unauthorized"`},
		{"reordered batch, renumbered", []int{1, 3}, func(l []tellLine) []tellLine {
			l[1].Msg, l[2].Msg = l[2].Msg, l[1].Msg
			return l
		}, []string{"1"}, `"kind":"unauthorized"`},
		{"batches swapped, renumbered", []int{1, 2, 2}, func(l []tellLine) []tellLine {
			return renumber(append(l[:1:1], l[3], l[4], l[1], l[2]))
		}, []string{"1"}, `"kind":"unauthorized"`},
		{"replayed batch", []int{2}, func(l []tellLine) []tellLine {
			return append(l, l...)
		}, []string{"1", "2"}, `"kind":"unauthorized"`},
		{"replayed batch, renumbered", []int{2}, func(l []tellLine) []tellLine {
			return renumber(append(l, slices.Clone(l)...))
		}, []string{"1", "2"}, `"kind":"unauthorized"`},
		{"unsigned tail", []int{1, 2}, func(l []tellLine) []tellLine {
			return l[:2]
		}, []string{"1"}, `"kind":"bad_request"`},
		{"batch past its bounds", []int{tellBatchLines + 1}, nil, nil, `"kind":"unauthorized"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A stream of its own per case: the server refuses an opening
			// it has seen (a replay), as two cases in one millisecond
			// would be.
			path, ts := tellPath("tester", uint64(i+1)), strconv.FormatInt(time.Now().UnixMilli(), 10)
			sig := sg.signRequest(http.MethodPost, path, ts, "", nil)
			lines := signedBatches(sg, sig, tc.sizes...)
			if tc.tamper != nil {
				lines = tc.tamper(lines)
			}
			var body strings.Builder
			for _, l := range lines {
				body.Write(mustJSON(l))
				body.WriteByte('\n')
			}
			req, _ := http.NewRequestWithContext(within(t, 5*time.Second), http.MethodPost, "http://"+s.Addr()+path, strings.NewReader(body.String()))
			req.Header = http.Header{headerTime: {ts}, headerSignature: {sig}}
			resp, err := h2c(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			end, _ := io.ReadAll(resp.Body) // the server has delivered all it will
			resp.Body.Close()
			if tc.end == "" && len(end) > 0 || !strings.Contains(string(end), tc.end) {
				t.Errorf("the stream ended with %q, want %q", end, tc.end)
			}
			var delivered []string
			for len(got) > 0 {
				m := <-got
				delivered = append(delivered, m.msg)
			}
			if !slices.Equal(delivered, tc.want) {
				t.Errorf("delivered %q, want %q", delivered, tc.want)
			}
		})
	}
}
