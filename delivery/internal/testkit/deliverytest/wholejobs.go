package deliverytest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/trellis-go/trellis/delivery"
)

// Without resending, a chunked job reaches the consumer whole only if
// every one of its chunks passed the link: the consumer controller can
// deliver those jobs and no others. The link keeps what passed, so that a
// test can check exactly that, whatever the losses of its seed.

// passedChunk is a chunk that reached the consumer controller.
type passedChunk struct {
	seqNr delivery.SeqNr
	chunk *delivery.ChunkedMessage
}

// SentMax is the highest sequence number of the SequencedMessages the
// producer controller sent through the link, passed or lost.
func (l *FaultLink[A]) SentMax() delivery.SeqNr { return l.sentMax.Load() }

// WholeJobs are the jobs, in order, all of whose chunks reached the
// consumer controller through l, each chunk after the one before it.
func WholeJobs(l *FaultLink[Job]) []int {
	l.passedMu.Lock()
	passed := slices.Clone(l.passed)
	l.passedMu.Unlock()
	slices.SortStableFunc(passed, func(a, b passedChunk) int { return cmp.Compare(a.seqNr, b.seqNr) })
	passed = slices.CompactFunc(passed, func(a, b passedChunk) bool { return a.seqNr == b.seqNr })
	var jobs []int
	var data []byte
	started := false
	for i, p := range passed {
		switch {
		case p.chunk.First:
			data, started = append(data[:0], p.chunk.Data...), true
		case started && p.seqNr == passed[i-1].seqNr+1:
			data = append(data, p.chunk.Data...)
		default:
			started = false
			continue
		}
		if p.chunk.Last && started {
			var j Job
			if err := json.Unmarshal(data, &j); err == nil {
				jobs = append(jobs, j.N)
			}
			started = false
		}
	}
	return jobs
}

// ChunksOf is the number of chunks of size bytes that jobs 1..n take.
func ChunksOf(n, size int) delivery.SeqNr {
	var total delivery.SeqNr
	for i := 1; i <= n; i++ {
		b, _ := json.Marshal(Job{N: i})
		total += delivery.SeqNr((len(b) + size - 1) / size)
	}
	return total
}

// WaitWholeJobs waits, a minute at most, until the producer controller
// has sent every chunk of jobs 1..C.Messages through link and the consumer
// has delivered every job that reached its controller whole, or delivers
// no more for a second (a controller with a delivery out drops what comes
// beyond its stash, whole or not). Every job delivered must have reached
// it whole, in order.
func (r *LossRun) WaitWholeJobs(col *Collector, link *FaultLink[Job]) error {
	last := ChunksOf(r.C.Messages, r.C.Chunk)
	deadline := time.Now().Add(time.Minute)
	var whole, got []int
	quietSince, count := time.Now(), -1
	for {
		whole, got = WholeJobs(link), col.Jobs()
		if len(got) != count {
			quietSince, count = time.Now(), len(got)
		}
		if link.SentMax() >= last && (slices.Equal(got, whole) || time.Since(quietSince) > time.Second) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %d of %d chunks sent within a minute; delivered jobs %v\n\tlinks: %s\n\tlog tail:\n%s",
				r.Params(), link.SentMax(), last, got, link.Describe(), r.Logs.Tail(20))
		}
		time.Sleep(time.Millisecond)
	}
	if !isSubsequence(got, whole) {
		return fmt.Errorf("%s: delivered jobs %v, but only these reached the consumer controller whole: %v\n\tlinks: %s",
			r.Params(), got, whole, link.Describe())
	}
	if r.TB.Failed() {
		return fmt.Errorf("%s: %s", r.Params(), r.TB.Errors())
	}
	return nil
}

// isSubsequence reports whether every element of sub is in seq, in the
// same order.
func isSubsequence(sub, seq []int) bool {
	i := 0
	for _, v := range seq {
		if i < len(sub) && sub[i] == v {
			i++
		}
	}
	return i == len(sub)
}
