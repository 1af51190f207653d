package timers

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestExportLegacy: timers in the key layout before the partitions
// (<prefix>:timers:data and …:due) are exported and imported into this
// layout, with their calls, retries and due times (a lease's end when one
// was held).
func TestExportLegacy(t *testing.T) {
	clk := clockwork.NewFakeClockAt(epoch)
	client := testenv.Redis(t)
	prefix := newTestPrefix()
	store := newRedisStoreOn(t, client, prefix, clk)
	due := epoch.Add(time.Minute).UnixMilli()
	legacy := map[string]string{
		"plain":  "7:" + strconv.FormatInt(epoch.UnixMilli(), 10) + ":2:" + strconv.FormatInt(due, 10) + ":0:0:0:" + `{"componentId":"test-action","method":"run","argument":{"id":1}}`,
		"leased": "8:" + strconv.FormatInt(epoch.UnixMilli(), 10) + ":0:" + strconv.FormatInt(due, 10) + ":1:" + strconv.FormatInt(due, 10) + ":2:no" + `{"componentId":"test-action","method":"run","argument":2}`,
	}
	ctx := t.Context()
	for name, rec := range legacy {
		if err := client.HSet(ctx, prefix+":timers:data", name, rec).Err(); err != nil {
			t.Fatal(err)
		}
	}
	client.ZAdd(ctx, prefix+":timers:due", redis.Z{Score: float64(due), Member: "plain"},
		redis.Z{Score: float64(due + 30_000), Member: "leased"})

	s := newScheduler(t, store, newRecorder(clk), Config{})
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if err := s.ExportLegacy(ctx, func(r ExportRecord) error { return enc.Encode(r) }); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Import(ctx, &buf, false)
	if err != nil || rep.Imported != 2 || rep.RefusedCount != 0 {
		t.Fatalf("Import = %+v, %v", rep, err)
	}
	for name, want := range map[string]struct {
		due        int64
		maxRetries int
		arg        string
	}{"plain": {due, 2, `{"id":1}`}, "leased": {due + 30_000, 0, `2`}} {
		got, err := s.Get(ctx, name)
		if err != nil || got.DueAt.UnixMilli() != want.due || got.MaxRetries != want.maxRetries || string(got.Call.Argument) != want.arg {
			t.Errorf("%s imported as %+v, %v; want due %d, maxRetries %d, argument %s", name, got, err, want.due, want.maxRetries, want.arg)
		}
	}
	if err := newScheduler(t, NewMemoryStore(clk), newRecorder(clk), Config{}).ExportLegacy(ctx, nil); err == nil {
		t.Error("ExportLegacy of a memory store: no error")
	}
}
