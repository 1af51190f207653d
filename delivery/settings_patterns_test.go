package delivery_test

import (
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/delivery/sharding"
	"github.com/trellis-go/trellis/delivery/workpulling"
	"github.com/trellis-go/trellis/runtime"
)

// TestPatternSettingsValidation: work-pulling and sharding settings out of
// range are an error naming the field, before any controller runs; zero
// fields take the defaults.
func TestPatternSettingsValidation(t *testing.T) {
	key := runtime.NewServiceKey[delivery.ConsumerCommand[deliverytest.Job]]("workers")
	consumer := func(string, runtime.Ref[delivery.ConsumerStart[deliverytest.Job]]) runtime.Behavior[deliverytest.ConsMsg] {
		return nil
	}
	cases := []struct {
		name        string
		workPulling *workpulling.Settings      // checked with workpulling.NewProducerController
		sharding    *sharding.Settings         // checked with sharding.NewProducerController
		consumer    *sharding.ConsumerSettings // checked with sharding.NewConsumerController
		field       string                     // the field the error must name
	}{
		{name: "work pulling: negative buffer", workPulling: &workpulling.Settings{BufferSize: -1}, field: "workpulling.Settings.BufferSize"},
		{name: "work pulling: bad producer settings", workPulling: &workpulling.Settings{Producer: delivery.ProducerSettings{ChunkLargeMessages: -1}}, field: "ChunkLargeMessages"},
		{name: "sharding: negative buffer", sharding: &sharding.Settings{BufferSize: -5}, field: "sharding.Settings.BufferSize"},
		{name: "sharding: cleanup below 1ms", sharding: &sharding.Settings{CleanupUnusedAfter: time.Microsecond}, field: "sharding.Settings.CleanupUnusedAfter"},
		{name: "sharding: wake below 1ms", sharding: &sharding.Settings{ResendFirstUnconfirmedIdleTimeout: -time.Second}, field: "sharding.Settings.ResendFirstUnconfirmedIdleTimeout"},
		{name: "sharding: bad producer settings", sharding: &sharding.Settings{Producer: delivery.ProducerSettings{ResendFirstInterval: time.Microsecond}}, field: "ResendFirstInterval"},
		{name: "sharding consumer: negative buffer", consumer: &sharding.ConsumerSettings{BufferSize: -1}, field: "sharding.ConsumerSettings.BufferSize"},
		{name: "sharding consumer: window 1", consumer: &sharding.ConsumerSettings{Consumer: delivery.ConsumerSettings{FlowControlWindow: 1}}, field: "FlowControlWindow"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			switch {
			case tc.workPulling != nil:
				_, err = workpulling.NewProducerController[deliverytest.Job]("wp", key, *tc.workPulling)
			case tc.sharding != nil:
				_, err = sharding.NewProducerController[deliverytest.Job]("sp", (*runtime.Sharding[delivery.ConsumerCommand[deliverytest.Job]])(nil), *tc.sharding)
			default:
				_, err = sharding.NewConsumerController(consumer, *tc.consumer)
			}
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %v, want one naming %s", err, tc.field)
			}
		})
	}
	if _, err := workpulling.NewProducerController[deliverytest.Job]("", key, workpulling.Settings{}); err == nil {
		t.Fatal("an empty producer id is accepted")
	}
	if _, err := sharding.NewProducerController[deliverytest.Job]("sp", nil, sharding.Settings{}); err == nil || !strings.Contains(err.Error(), "region") {
		t.Fatalf("a nil region: error %v", err)
	}
	if s := workpulling.DefaultSettings(); s.BufferSize != 1000 || s.Producer != delivery.DefaultProducerSettings() {
		t.Fatalf("work-pulling defaults %+v", s)
	}
	if s := sharding.DefaultSettings(); s.BufferSize != 1000 || s.CleanupUnusedAfter != 120*time.Second || s.ResendFirstUnconfirmedIdleTimeout != 10*time.Second {
		t.Fatalf("sharding defaults %+v", s)
	}
	if s := sharding.DefaultConsumerSettings(); s.BufferSize != 1000 || s.Consumer != delivery.DefaultConsumerSettings() {
		t.Fatalf("sharding consumer defaults %+v", s)
	}
}
