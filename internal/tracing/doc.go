// Package tracing holds what the service's OpenTelemetry tracing is made
// of: the tracer provider built from the standard OTEL_* variables, with a
// bounded export queue whose drops are counted; the helpers the packages
// open their spans with, which cost nothing when tracing is off (a nil
// tracer); the W3C trace context carried in headers and kept in stored
// timers; and the log handler that stamps each line with its span.
//
// Tracing is off unless an exporter is configured: every span helper
// then returns its context unchanged and a no-op span.
package tracing
