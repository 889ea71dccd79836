package config

import (
	"fmt"
	"time"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/retry"
)

// The policies a configuration describes, built once here for the worker
// and checked by retry's own Validate (the one place their rules live).

// Backoff is the delayed-retry policy (its max_retries aside). It is
// usable only after Load has validated the configuration.
func (r Retry) Backoff() retry.Backoff {
	b := retry.Backoff{Base: r.Base.D(), Factor: r.Factor, Max: r.MaxDelay.D()}
	if len(r.Jitter) == 2 {
		b.JitterLow, b.JitterHigh = r.Jitter[0], r.Jitter[1]
	}
	return b
}

// Config is the breaker policy; probeTimeout frees a half-open probe's
// slot if its worker never reports (twice the longest provider timeout).
func (b Breaker) Config(probeTimeout time.Duration) breaker.Config {
	c := breaker.DefaultConfig
	c.ConsecutiveFailures, c.ErrorRate, c.MinCalls = b.ConsecutiveFailures, b.ErrorRate, b.MinCalls
	c.Window, c.Cooldown, c.ProbeTimeout = b.Window.D(), b.Cooldown.D(), probeTimeout
	return c
}

// Hedge reads hedge_after: a latency quantile to hedge at (0.95 for "p95",
// 0.99 for "p99"), or a fixed delay; both zero for "off" or empty.
func (r Route) Hedge() (quantile float64, after time.Duration, err error) {
	switch r.HedgeAfter {
	case "off", "":
		return 0, 0, nil
	case "p95":
		return 0.95, 0, nil
	case "p99":
		return 0.99, 0, nil
	}
	d, err := parseDuration(r.HedgeAfter)
	if err != nil {
		return 0, 0, fmt.Errorf("%q is not off, p95, p99 or a duration", r.HedgeAfter)
	}
	return 0, d, nil
}
