package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/trellis-go/trellis/samples/outbox"
	"github.com/trellis-go/trellis/trellistest"
)

func TestMain(m *testing.M) { trellistest.Servers(m).Run() }

// mailbox is the test's Mailer: every notice mailed, in order. While
// paused it fails every mail (the notices stay unconfirmed).
type mailbox struct {
	mu     sync.Mutex
	sent   []outbox.Notice
	paused bool
}

func (m *mailbox) Mail(_ context.Context, n outbox.Notice) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.paused {
		return errors.New("the mail server is paused")
	}
	m.sent = append(m.sent, n)
	return nil
}

func (m *mailbox) pause() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.paused = true
}

func (m *mailbox) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sent)
}

// TestOutbox: a notice per state change is mailed, in order; after a
// graceful stop and a start on the same Redis, none is mailed again; the
// producer is part of /readyz and of /metrics.
func TestOutbox(t *testing.T) {
	const changes = 20
	m := &mailbox{}
	opts := []trellistest.Option{trellistest.WithRedisURL(trellistest.RedisURL(t)), trellistest.WithStorePrefix("outbox-test-" + uuid.NewString()[:8])}
	ts := trellistest.Start(t, outbox.Setup(m), opts...)
	for i := range changes {
		if resp := ts.Do(t, http.MethodPut, fmt.Sprintf("/holds/h%d/state/expired", i), nil); resp.Status != http.StatusAccepted {
			t.Fatalf("change %d: %d %s", i, resp.Status, resp.Body)
		}
	}
	trellistest.Eventually(t, 10*time.Second, "every notice mailed", func() bool { return m.count() == changes })
	if resp := ts.Get(t, "/readyz"); resp.Status != http.StatusOK {
		t.Fatalf("/readyz: %d %s", resp.Status, resp.Body)
	}
	if body := string(ts.Get(t, "/metrics").Body); !strings.Contains(body, `trellis_readiness_check{check="notices"} 1`) {
		t.Fatal("/metrics has no trellis_readiness_check of the notices at 1")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := ts.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	ts = trellistest.Start(t, outbox.Setup(m), opts...)
	if resp := ts.Do(t, http.MethodPut, "/holds/after/state/confirmed", nil); resp.Status != http.StatusAccepted {
		t.Fatalf("change after the restart: %d %s", resp.Status, resp.Body)
	}
	trellistest.Eventually(t, 10*time.Second, "the new notice mailed", func() bool { return m.count() > changes })
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, n := range m.sent[:changes] {
		if n.Hold != fmt.Sprintf("h%d", i) {
			t.Fatalf("notice %d is for %s, want h%d", i, n.Hold, i)
		}
	}
	if n := m.sent[changes]; n.Hold != "after" || len(m.sent) != changes+1 {
		t.Fatalf("after the restart: %v, want only the new notice: %d mailed again", m.sent[changes:], len(m.sent)-changes-1)
	}
}
