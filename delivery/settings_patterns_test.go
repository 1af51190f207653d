package delivery

import (
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis/runtime"
)

// TestPatternSettingsValidation: work-pulling and sharding settings out of
// range are an error naming the field, before any controller runs; zero
// fields take the defaults.
func TestPatternSettingsValidation(t *testing.T) {
	key := runtime.NewServiceKey[ConsumerCommand[job]]("workers")
	consumer := func(string, runtime.Ref[ConsumerStart[job]]) runtime.Behavior[consMsg] { return nil }
	cases := []struct {
		name        string
		workPulling *WorkPullingSettings      // checked with NewWorkPullingProducerController
		sharding    *ShardingSettings         // checked with NewShardingProducerController
		consumer    *ShardingConsumerSettings // checked with NewShardingConsumerController
		field       string                    // the field the error must name
	}{
		{name: "work pulling: negative buffer", workPulling: &WorkPullingSettings{BufferSize: -1}, field: "workpulling.Settings.BufferSize"},
		{name: "work pulling: bad producer settings", workPulling: &WorkPullingSettings{Producer: ProducerSettings{ChunkLargeMessages: -1}}, field: "ChunkLargeMessages"},
		{name: "sharding: negative buffer", sharding: &ShardingSettings{BufferSize: -5}, field: "sharding.Settings.BufferSize"},
		{name: "sharding: cleanup below 1ms", sharding: &ShardingSettings{CleanupUnusedAfter: time.Microsecond}, field: "sharding.Settings.CleanupUnusedAfter"},
		{name: "sharding: wake below 1ms", sharding: &ShardingSettings{ResendFirstUnconfirmedIdleTimeout: -time.Second}, field: "sharding.Settings.ResendFirstUnconfirmedIdleTimeout"},
		{name: "sharding: bad producer settings", sharding: &ShardingSettings{Producer: ProducerSettings{ResendFirstInterval: time.Microsecond}}, field: "ResendFirstInterval"},
		{name: "sharding consumer: negative buffer", consumer: &ShardingConsumerSettings{BufferSize: -1}, field: "sharding.ConsumerSettings.BufferSize"},
		{name: "sharding consumer: window 1", consumer: &ShardingConsumerSettings{Consumer: ConsumerSettings{FlowControlWindow: 1}}, field: "FlowControlWindow"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			switch {
			case tc.workPulling != nil:
				_, err = NewWorkPullingProducerController[job]("wp", key, *tc.workPulling)
			case tc.sharding != nil:
				_, err = NewShardingProducerController[job]("sp", (*runtime.Sharding[ConsumerCommand[job]])(nil), *tc.sharding)
			default:
				_, err = NewShardingConsumerController(consumer, *tc.consumer)
			}
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %v, want one naming %s", err, tc.field)
			}
		})
	}
	if _, err := NewWorkPullingProducerController[job]("", key, WorkPullingSettings{}); err == nil {
		t.Fatal("an empty producer id is accepted")
	}
	if _, err := NewShardingProducerController[job]("sp", nil, ShardingSettings{}); err == nil || !strings.Contains(err.Error(), "region") {
		t.Fatalf("a nil region: error %v", err)
	}
	if s := DefaultWorkPullingSettings(); s.BufferSize != 1000 || s.Producer != DefaultProducerSettings() {
		t.Fatalf("work-pulling defaults %+v", s)
	}
	if s := DefaultShardingSettings(); s.BufferSize != 1000 || s.CleanupUnusedAfter != 120*time.Second || s.ResendFirstUnconfirmedIdleTimeout != 10*time.Second {
		t.Fatalf("sharding defaults %+v", s)
	}
	if s := DefaultShardingConsumerSettings(); s.BufferSize != 1000 || s.Consumer != DefaultConsumerSettings() {
		t.Fatalf("sharding consumer defaults %+v", s)
	}
}
