// Package defaults holds the built-in defaults that more than one layer
// applies, each defined once: the configuration's one defaults step
// (config.Default) and the lower layers' zero values (a store, a client or
// a router built without the configuration, as tests and the SDK's parts
// do) read them here. docs/configuration.md documents them; its test
// holds the two together.
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
)

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
