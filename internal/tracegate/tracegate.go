// Package tracegate says whether anybody collects spans: until a program
// installs an OpenTelemetry tracer provider (agentq's own when an OTLP
// endpoint is configured, or the program's), every span agentq would start
// is a no-op that still costs allocations on each step and call, so the
// hot paths skip them.
package tracegate

import "go.opentelemetry.io/otel"

// unset is OpenTelemetry's global provider before any is installed (a
// delegate that otel.SetTracerProvider replaces), read when this package
// is initialized: a provider installed by the init function of a package
// initialized earlier would count as none (install it in main, or after
// imports are initialized, as agentq's own tracing does).
var unset = otel.GetTracerProvider()

// On reports whether a tracer provider has been installed.
func On() bool { return otel.GetTracerProvider() != unset }
