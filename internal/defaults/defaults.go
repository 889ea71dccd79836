// Package defaults holds the built-in defaults, each defined once. The
// configuration's one defaults step (config.Default) applies them; the
// layers below the configuration (the store, the spec's limits, the
// producer client, the handler, the router) take the values they are
// given and fill nothing in: a part built without a configuration (a
// test, a bench) passes these, or spec.DefaultLimits and
// router.DefaultHealthConfig, which are made of them.
// docs/configuration.md documents them; its test holds the two together.
package defaults

import "time"

// Retention is how long workflow records, results and finished tasks are
// kept (retention).
const Retention = 24 * time.Hour

// Limits a producer checks specs against and a worker applies (limits:).
const (
	MaxSteps       = 100     // steps in one spec
	MaxSpecBytes   = 1 << 20 // one spec's size
	MaxOutputBytes = 1 << 20 // one step's stored output
	MaxTurns       = 20      // the cap on a step's max_turns (model–tool turns)
	MaxMapItems    = 10000   // the cap on a map step's max_items
	// MaxTreeWorkflows caps the workflows under one root: the root, its
	// children, theirs.
	MaxTreeWorkflows = 10000
	// MaxKeptSignals caps the signals kept (no step waited) across every
	// name and match.
	MaxKeptSignals = 10000
	// MaxSignalBytes caps one signal's data.
	MaxSignalBytes = 64 << 10
)

// Waits and open workflows (limits:): a wait's timeout (wait_for,
// approval, deadline) is at most MaxWait; a workflow still open
// MaxOpenAge after its submit ends timed_out. Retention counts from a
// workflow's end.
const (
	MaxWait    = 7 * 24 * time.Hour
	MaxOpenAge = 30 * 24 * time.Hour
)

// Event streams one dashboard process serves (dashboard:): at most
// MaxStreams at once, MaxStreamsPerClient of them to one client address.
const (
	MaxStreams          = 10000
	MaxStreamsPerClient = 100
)

// EventLimit bounds each workflow's event log (events.limit): about
// this many newest entries are kept.
const EventLimit = 10000

// SignalKeep is how long a signal no step waited for is kept for the
// first step that begins waiting on it (signals.keep).
const SignalKeep = 10 * time.Minute

// ProviderTimeout bounds one provider call (providers[].timeout).
const ProviderTimeout = 60 * time.Second

// Health scoring of targets (resilience.health).
const (
	HealthWindow        = 5 * time.Minute
	HealthSuccessWeight = 0.4
	HealthLatencyWeight = 0.3
	HealthTrendWeight   = 0.3
)

// Rate-limited keys (resilience.keys): a 429 without Retry-After rests
// the key KeyCooldown, one with it at most KeyMaxCooldown.
const (
	KeyCooldown    = 10 * time.Second
	KeyMaxCooldown = time.Minute
)
