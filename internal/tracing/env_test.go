package tracing

import (
	"errors"
	"testing"
)

func TestReadEnv(t *testing.T) {
	for _, tc := range []struct {
		name   string
		env    map[string]string
		on     bool
		proto  string
		queue  int
		badVar string
	}{
		{name: "nothing set: off", env: nil, proto: ProtocolHTTP, queue: DefaultQueueSize},
		{name: "an endpoint: on over HTTP", env: map[string]string{EnvEndpoint: "http://collector:4318"}, on: true, proto: ProtocolHTTP, queue: DefaultQueueSize},
		{name: "the traces endpoint", env: map[string]string{EnvTracesEndpoint: "https://c/v1/traces"}, on: true, proto: ProtocolHTTP, queue: DefaultQueueSize},
		{name: "exporter otlp without endpoint: on, SDK default", env: map[string]string{EnvTracesExporter: "otlp"}, on: true, proto: ProtocolHTTP, queue: DefaultQueueSize},
		{name: "grpc", env: map[string]string{EnvEndpoint: "http://c:4317", EnvProtocol: "grpc"}, on: true, proto: ProtocolGRPC, queue: DefaultQueueSize},
		{name: "the traces protocol wins", env: map[string]string{EnvEndpoint: "http://c:4317", EnvProtocol: "grpc", EnvTracesProtocol: "http/protobuf"}, on: true, proto: ProtocolHTTP, queue: DefaultQueueSize},
		{name: "exporter none", env: map[string]string{EnvEndpoint: "http://c:4318", EnvTracesExporter: "none"}, proto: ProtocolHTTP, queue: DefaultQueueSize},
		{name: "SDK disabled", env: map[string]string{EnvEndpoint: "http://c:4318", EnvSDKDisabled: "true"}, proto: ProtocolHTTP, queue: DefaultQueueSize},
		{name: "queue size", env: map[string]string{EnvEndpoint: "http://c:4318", EnvQueueSize: "64"}, on: true, proto: ProtocolHTTP, queue: 64},
		{name: "sampler with ratio", env: map[string]string{EnvSampler: "parentbased_traceidratio", EnvSamplerArg: "0.25"}, proto: ProtocolHTTP, queue: DefaultQueueSize},
		{name: "bad disabled", env: map[string]string{EnvSDKDisabled: "yes please"}, badVar: EnvSDKDisabled},
		{name: "bad endpoint", env: map[string]string{EnvEndpoint: "collector:4318"}, badVar: EnvEndpoint},
		{name: "bad traces endpoint", env: map[string]string{EnvTracesEndpoint: "ftp://c"}, badVar: EnvTracesEndpoint},
		{name: "bad protocol", env: map[string]string{EnvProtocol: "http/json"}, badVar: EnvProtocol},
		{name: "bad sampler", env: map[string]string{EnvSampler: "sometimes"}, badVar: EnvSampler},
		{name: "bad ratio", env: map[string]string{EnvSampler: "traceidratio", EnvSamplerArg: "1.5"}, badVar: EnvSamplerArg},
		{name: "bad exporter", env: map[string]string{EnvTracesExporter: "zipkin"}, badVar: EnvTracesExporter},
		{name: "bad queue size", env: map[string]string{EnvQueueSize: "-1"}, badVar: EnvQueueSize},
		{name: "bad timeout", env: map[string]string{EnvTimeout: "10s"}, badVar: EnvTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ReadEnv(func(k string) string { return tc.env[k] })
			if tc.badVar != "" {
				var ee *EnvError
				if !errors.As(err, &ee) || ee.Var != tc.badVar {
					t.Fatalf("err = %v, want an *EnvError naming %s", err, tc.badVar)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.On != tc.on || s.Protocol != tc.proto || s.QueueSize != tc.queue {
				t.Fatalf("settings = %+v, want on=%v protocol=%s queue=%d", s, tc.on, tc.proto, tc.queue)
			}
		})
	}
}
