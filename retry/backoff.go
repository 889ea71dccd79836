package retry

import (
	"errors"
	"math"
	"time"
)

// Backoff is exponential backoff with multiplicative jitter:
// delay(n) = min(Base × Factor^n, Max) × j, j uniform in [JitterLow, JitterHigh).
// The zero value is invalid; use validate-checked values from config.
type Backoff struct {
	Base       time.Duration
	Factor     float64
	Max        time.Duration
	JitterLow  float64
	JitterHigh float64
}

// DefaultMaxRetries is how many delayed retries a step gets when neither
// its spec nor the configuration says: about an hour of DefaultBackoff.
const DefaultMaxRetries = 12

// DefaultBackoff is the default delayed-retry policy: 1s × 2^n, capped at 5m, jitter [0.5, 1.5).
var DefaultBackoff = Backoff{Base: time.Second, Factor: 2, Max: 5 * time.Minute, JitterLow: 0.5, JitterHigh: 1.5}

// Validate reports a Backoff that cannot be used.
func (b Backoff) Validate() error {
	switch {
	case b.Base <= 0:
		return errors.New("backoff: base must be positive")
	case b.Factor < 1:
		return errors.New("backoff: factor must be at least 1")
	case b.Max < b.Base:
		return errors.New("backoff: max must be at least base")
	case b.JitterLow <= 0 || b.JitterHigh < b.JitterLow:
		return errors.New("backoff: jitter must be 0 < low <= high")
	}
	return nil
}

// Delay is the wait before retry number attempt (0 for the first retry).
// random returns a value in [0, 1); it is injected so tests are exact.
func (b Backoff) Delay(attempt int, random func() float64) time.Duration {
	if attempt < 0 {
		attempt = 0
	}
	d := float64(b.Base) * math.Pow(b.Factor, float64(attempt))
	if d > float64(b.Max) || math.IsInf(d, 0) || math.IsNaN(d) {
		d = float64(b.Max)
	}
	j := b.JitterLow + (b.JitterHigh-b.JitterLow)*random()
	return time.Duration(d * j)
}
