package outbox_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/trellis-go/trellis/samples/outbox"
	"github.com/trellis-go/trellis/trellistest"
)

// TestOutboxThroughCutConnections: changes accepted by the instance that
// does not own the queue go through the owner; while they stream, the
// connection between the two is cut (a partition, then its reset) so that
// some notices are stored and mailed by the owner while their answer is
// lost. Each such Send is made again and the owner, knowing it by its id,
// answers it without storing it twice: every change is accepted, every
// notice mailed, none twice (neither instance crashed).
func TestOutboxThroughCutConnections(t *testing.T) {
	const (
		workers   = 4
		perWorker = 40
		cuts      = 10 // at most: until one notice was stored with its answer lost
	)
	a := &instance{m: &mailbox{}}
	a.ts = trellistest.StartInstances(t, 1, outbox.Setup(a.m))[0]
	b := &instance{m: &mailbox{}}
	b.ts = trellistest.JoinInstance(t, a.ts, outbox.Setup(b.m))
	change(t, a.ts, "first-a")
	change(t, b.ts, "first-b")
	trellistest.Eventually(t, 30*time.Second, "the first notices mailed", func() bool {
		return len(holdsMailed(a, b)) == 2
	})
	own, other := owner(t, a, b)

	var mu sync.Mutex
	answered := make(map[string]bool)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				hold := fmt.Sprintf("w%d-%d", w, i)
				resp := other.ts.Do(t, http.MethodPut, "/holds/"+hold+"/state/expired", nil)
				if resp.Status != http.StatusAccepted {
					t.Errorf("change %s: %d %s", hold, resp.Status, resp.Body)
				}
				mu.Lock()
				answered[hold] = true
				mu.Unlock()
			}
		})
	}
	// storedUnanswered is a notice the owner mailed whose Send has not
	// answered yet.
	storedUnanswered := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for hold := range holdsMailed(own) {
			if hold[0] == 'w' && !answered[hold] {
				return true
			}
		}
		return false
	}
	nAnswered := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(answered)
	}
	caught := 0
	for range cuts {
		// Cut while the changes stream: once a few more were answered.
		from := nAnswered()
		trellistest.Eventually(t, 30*time.Second, "changes answered", func() bool { return nAnswered() >= min(from+3, workers*perWorker) })
		if nAnswered() == workers*perWorker {
			break
		}
		other.ts.Partition()
		deadline := time.Now().Add(2 * time.Second)
		for !storedUnanswered() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond) // a poll, bounded by the deadline
		}
		if storedUnanswered() {
			caught++
		}
		other.ts.Heal()
		if caught > 0 {
			break
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	trellistest.Eventually(t, 30*time.Second, "every notice mailed", func() bool {
		return len(holdsMailed(a, b)) == 2+workers*perWorker
	})
	if twice := mailedTwice(holdsMailed(a, b)); len(twice) > 0 {
		t.Fatalf("%d notices mailed twice with no crash: %v", len(twice), twice)
	}
	if caught == 0 {
		t.Fatalf("in %d cuts, no notice was stored while its answer was lost: the case was not reached", cuts)
	}
}
