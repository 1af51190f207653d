package ordering_test

import (
	"bufio"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis/samples/contract"
	"github.com/trellis-go/trellis/samples/ordering"
	"github.com/trellis-go/trellis/trellistest"
)

// TestFollowCustomerOrders follows alice's placed orders over HTTP as an
// SSE client: the orders placed before, then each placing, confirmation
// and cancellation; the client disconnects, more orders change, and it
// resumes with the last event's id. Its list must equal alice's placed
// orders each time, with no reset and no change seen twice.
func TestFollowCustomerOrders(t *testing.T) {
	var notices *ordering.Notices
	ts := trellistest.Start(t, orderApp(time.Hour, &notices))
	placed := make(map[string]bool) // alice's placed orders
	var last string
	place := func(customer string) string {
		resp := ts.Post(t, "/orders", map[string]any{"item": "tea", "quantity": 1, "customer": customer})
		if resp.Status != http.StatusCreated {
			t.Fatalf("POST /orders: %d %s", resp.Status, resp.Body)
		}
		var o contract.Order
		resp.JSON(t, &o)
		if customer == "alice" {
			placed[o.Id] = true
		}
		last = resp.Header.Get("Trellis-Change-Position")
		return o.Id
	}
	settle := func(id, how string) {
		if resp := ts.Post(t, "/orders/"+id+"/"+how, nil); resp.Status != http.StatusOK {
			t.Fatalf("%s %s: %d %s", how, id, resp.Status, resp.Body)
		}
		delete(placed, id)
	}
	a, b := place("alice"), place("alice")
	place("bob")
	trellistest.Eventually(t, 10*time.Second, "the placings listed", func() bool {
		return ts.Get(t, "/customers/alice/orders?after="+last).Status == http.StatusOK
	})

	s := openStream(t, ts.URL+"/customers/alice/orders/stream", nil)
	s.until(t, placed)
	c := place("alice")
	settle(a, "confirm")
	place("bob")
	settle(c, "cancel")
	place("alice")
	s.until(t, placed)

	s.close()
	settle(b, "confirm")
	place("alice")
	place("alice")
	s = openStream(t, ts.URL+"/customers/alice/orders/stream", s)
	s.until(t, placed)
	if !s.resumed {
		t.Fatal("the stream sent the orders anew instead of resuming")
	}
}

// stream is an SSE client of a customer's orders.
type stream struct {
	cancel  context.CancelFunc
	events  chan [3]string // event, id (or "-" for none), data
	orders  map[string]bool
	last    map[string]string // order id → its last change's position
	lastID  string
	resumed bool // no rows were sent: the stream went on from lastID
}

// openStream follows url, resuming after prev's last event (nil: from
// the start) with prev's orders.
func openStream(t *testing.T, url string, prev *stream) *stream {
	t.Helper()
	s := &stream{events: make(chan [3]string, 256), orders: make(map[string]bool), last: make(map[string]string)}
	if prev != nil {
		s.orders, s.last, s.lastID, s.resumed = prev.orders, prev.last, prev.lastID, true
	}
	lastID := s.lastID
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("follow: %s", resp.Status)
	}
	s.cancel = cancel
	done := make(chan struct{})
	go s.read(resp, done)
	t.Cleanup(func() { _ = resp.Body.Close() }) // the reader closes it too, when the stream ends
	t.Cleanup(func() { s.close(); <-done })
	return s
}

func (s *stream) close() { s.cancel() }

// read parses the events of resp as the SSE format has them, until it
// ends, then closes done.
func (s *stream) read(resp *http.Response, done chan<- struct{}) {
	defer close(done)
	defer resp.Body.Close()
	defer close(s.events)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	ev := [3]string{"", "-", ""}
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if ev[0] != "" || ev[1] != "-" {
				s.events <- ev
			}
			ev = [3]string{"", "-", ""}
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		switch value = strings.TrimPrefix(value, " "); name {
		case "event":
			ev[0] = value
		case "id":
			ev[1] = value
		case "data":
			ev[2] += value
		}
	}
}

// until applies events until the stream's orders equal want.
func (s *stream) until(t *testing.T, want map[string]bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for !equalSets(s.orders, want) {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatal("the stream ended")
			}
			if ev[1] != "-" {
				s.lastID = ev[1]
			}
			var d struct{ ID, Position string }
			if ev[2] != "" {
				if err := json.Unmarshal([]byte(ev[2]), &d); err != nil {
					t.Fatalf("event %v: %v", ev, err)
				}
			}
			switch ev[0] {
			case "row":
				s.resumed = false
				s.orders[d.ID] = true
			case "reset":
				t.Fatal("a reset: the stream could not resume")
			case "added", "changed":
				s.noteChange(t, d.ID, d.Position)
				s.orders[d.ID] = true
			case "removed":
				s.noteChange(t, d.ID, d.Position)
				delete(s.orders, d.ID)
			}
		case <-deadline:
			t.Fatalf("the stream's orders %v, want %v", slices.Sorted(maps.Keys(s.orders)), slices.Sorted(maps.Keys(want)))
		}
	}
}

func (s *stream) noteChange(t *testing.T, id, pos string) {
	if prev, ok := s.last[id]; ok && prev == pos {
		t.Fatalf("order %s's change at %s seen twice", id, pos)
	}
	s.last[id] = pos
}

// equalSets: got has every order of want, as listed (true), and no other.
func equalSets(got, want map[string]bool) bool {
	if len(got) != len(want) {
		return false
	}
	for id := range want {
		if !got[id] {
			return false
		}
	}
	return true
}
