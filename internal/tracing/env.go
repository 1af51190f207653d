package tracing

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// The standard variables this package reads itself, to decide whether
// tracing is on and which exporter to make, and checks, so that a bad
// value stops the service at start rather than being ignored (the SDK
// only reports it to its error handler). The SDK and the exporters read
// the rest of the OTEL_* variables themselves (headers, resource,
// sampler, batch sizes, TLS).
const (
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvTimeout        = "OTEL_EXPORTER_OTLP_TIMEOUT"
	EnvTracesTimeout  = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"
	EnvSampler        = "OTEL_TRACES_SAMPLER"
	EnvSamplerArg     = "OTEL_TRACES_SAMPLER_ARG"
	EnvServiceName    = "OTEL_SERVICE_NAME"
	EnvResourceAttrs  = "OTEL_RESOURCE_ATTRIBUTES"
	EnvQueueSize      = "OTEL_BSP_MAX_QUEUE_SIZE"
	EnvBatchSize      = "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"
	EnvScheduleDelay  = "OTEL_BSP_SCHEDULE_DELAY"
	EnvExportTimeout  = "OTEL_BSP_EXPORT_TIMEOUT"
)

// The OTLP protocols (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// DefaultQueueSize is the export queue's bound when OTEL_BSP_MAX_QUEUE_SIZE
// is not set: the SDK's default.
const DefaultQueueSize = 2048

// EnvError is an OTEL_* variable whose value is refused.
type EnvError struct {
	Var    string
	Reason string
}

func (e *EnvError) Error() string { return e.Var + ": " + e.Reason }

// Settings is what the variables decide.
type Settings struct {
	// On: an exporter is configured and the SDK is not disabled.
	On bool
	// Protocol is ProtocolHTTP or ProtocolGRPC.
	Protocol string
	// QueueSize bounds the spans waiting for export; more are dropped.
	QueueSize int
}

// samplers are the OTEL_TRACES_SAMPLER values the SDK knows, and whether
// each takes a ratio as its argument.
var samplers = map[string]bool{
	"always_on": false, "always_off": false, "traceidratio": true,
	"parentbased_always_on": false, "parentbased_always_off": false, "parentbased_traceidratio": true,
}

// ReadEnv reads and checks the variables. Tracing is on when
// OTEL_TRACES_EXPORTER is "otlp", or when it is unset and an OTLP
// endpoint is; OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turn
// it off. The checks apply whether it is on or not: a typo is refused
// even in a variable that would not be used yet.
func ReadEnv(getenv func(string) string) (Settings, error) {
	get := func(k string) string { return strings.TrimSpace(getenv(k)) }
	s := Settings{Protocol: ProtocolHTTP, QueueSize: DefaultQueueSize}
	disabled := false
	if v := get(EnvSDKDisabled); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return s, &EnvError{EnvSDKDisabled, fmt.Sprintf("%q is not true or false", v)}
		}
		disabled = b
	}
	for _, k := range []string{EnvEndpoint, EnvTracesEndpoint} {
		if err := checkEndpoint(get(k)); err != nil {
			return s, &EnvError{k, err.Error()}
		}
	}
	for _, k := range []string{EnvProtocol, EnvTracesProtocol} {
		switch v := get(k); v {
		case "":
		case ProtocolHTTP, ProtocolGRPC:
			s.Protocol = v // the traces' own, read second, wins
		default:
			return s, &EnvError{k, fmt.Sprintf("%q is not a protocol this service exports with: want %s or %s", v, ProtocolHTTP, ProtocolGRPC)}
		}
	}
	if err := checkSampler(get(EnvSampler), get(EnvSamplerArg)); err != nil {
		return s, err
	}
	for _, k := range []string{EnvTimeout, EnvTracesTimeout, EnvQueueSize, EnvBatchSize, EnvScheduleDelay, EnvExportTimeout} {
		v := get(k)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return s, &EnvError{k, fmt.Sprintf("%q is not a positive whole number (of milliseconds, or of spans for sizes)", v)}
		}
		if k == EnvQueueSize {
			s.QueueSize = n
		}
	}
	switch v := get(EnvTracesExporter); v {
	case "":
		s.On = get(EnvEndpoint) != "" || get(EnvTracesEndpoint) != ""
	case "otlp":
		s.On = true
	case "none":
	default:
		return s, &EnvError{EnvTracesExporter, fmt.Sprintf("%q is not an exporter this service has: want otlp or none", v)}
	}
	s.On = s.On && !disabled
	return s, nil
}

// checkEndpoint: empty, or an absolute http(s) URL with a host.
func checkEndpoint(v string) error {
	if v == "" {
		return nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http:// or https:// URL with a host", v)
	}
	return nil
}

// checkSampler: a sampler the SDK knows, and for a ratio sampler a ratio
// from 0 to 1.
func checkSampler(name, arg string) error {
	if name == "" {
		return nil
	}
	ratio, ok := samplers[strings.ToLower(name)]
	if !ok {
		return &EnvError{EnvSampler, fmt.Sprintf("%q is not a sampler: want always_on, always_off, traceidratio, "+
			"parentbased_always_on, parentbased_always_off or parentbased_traceidratio", name)}
	}
	if !ratio || arg == "" {
		return nil
	}
	r, err := strconv.ParseFloat(arg, 64)
	if err != nil || r < 0 || r > 1 {
		return &EnvError{EnvSamplerArg, fmt.Sprintf("%q is not a ratio from 0 to 1", arg)}
	}
	return nil
}
