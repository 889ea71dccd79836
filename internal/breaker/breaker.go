package breaker

import (
	"errors"
	"time"
)

// State is a circuit breaker's state; the numbers are the values of
// the agentq_breaker_state metric.
type State uint8

// The states.
const (
	Closed   State = 0 // calls pass
	HalfOpen State = 1 // one probe call is out; everyone else waits
	Open     State = 2 // no calls until the cooldown ends
)

func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case HalfOpen:
		return "half-open"
	case Open:
		return "open"
	}
	return "unknown"
}

// Config tunes a breaker. Use DefaultConfig and change what
// you need; Validate reports a config that cannot work.
type Config struct {
	// ConsecutiveFailures opens the breaker after this many failures in a row.
	ConsecutiveFailures int
	// ErrorRate opens it when failures/calls over Window reach this, with
	// at least MinCalls calls in the window.
	ErrorRate float64
	MinCalls  int
	Window    time.Duration
	// Cooldown is how long it stays open before one probe may go, spread
	// by ± CooldownJitter (a share, e.g. 0.2) so that targets that failed
	// together do not all probe at once.
	Cooldown       time.Duration
	CooldownJitter float64
	// ProbeTimeout frees the half-open slot if its probe never reports back
	// (its worker died).
	ProbeTimeout time.Duration
}

// DefaultConfig is the default breaker: 5 in a row, or half of at least
// 10 calls in 10s; 30s ± 20% open; a probe's slot is held for up to 60s.
var DefaultConfig = Config{ConsecutiveFailures: 5, ErrorRate: 0.5, MinCalls: 10, Window: 10 * time.Second,
	Cooldown: 30 * time.Second, CooldownJitter: 0.2, ProbeTimeout: time.Minute}

// Validate reports a config that cannot work.
func (c Config) Validate() error {
	switch {
	case c.ConsecutiveFailures < 1:
		return errors.New("breaker: consecutive failures must be at least 1")
	case c.ErrorRate <= 0 || c.ErrorRate > 1:
		return errors.New("breaker: error rate must be in (0, 1]")
	case c.Window <= 0 || c.Cooldown <= 0 || c.ProbeTimeout <= 0:
		return errors.New("breaker: window, cooldown and probe timeout must be positive")
	case c.CooldownJitter < 0 || c.CooldownJitter >= 1:
		return errors.New("breaker: cooldown jitter must be in [0, 1)")
	}
	return nil
}

// Breaker is one target's breaker as a value: every method returns the
// next state and changes nothing, so the state can live anywhere (agentq
// keeps it in Redis and changes it by compare-and-set on Version).
type Breaker struct {
	State       State
	Consecutive int       // failures in a row while closed
	OpenUntil   time.Time // while open: when a probe may go
	ProbeUntil  time.Time // while half-open: when the probe's slot frees
	Version     int64     // bumped by every change; for compare-and-set
}

// Permit is what a caller may do.
type Permit uint8

// The permits.
const (
	Deny  Permit = iota // skip the target: no call
	Pass                // call it (closed)
	Probe               // call it as the one half-open probe: take the slot first (StartProbe)
)

// Allow says what a caller may do at now.
func (b Breaker) Allow(now time.Time) Permit {
	switch b.State {
	case Closed:
		return Pass
	case Open:
		if !now.Before(b.OpenUntil) {
			return Probe
		}
	case HalfOpen:
		if !now.Before(b.ProbeUntil) {
			return Probe // the last probe never reported back
		}
	}
	return Deny
}

// StartProbe is the state once a caller took the half-open slot.
func (b Breaker) StartProbe(now time.Time, c Config) Breaker {
	return Breaker{State: HalfOpen, ProbeUntil: now.Add(c.ProbeTimeout), Version: b.Version + 1}
}

// Window is what the error-rate rule reads: calls and failures over the
// config's window, the current failure included.
type Window struct{ Calls, Failures int }

// OnFailure is the state after a failed call. random returns [0, 1) and
// spreads the cooldown.
func (b Breaker) OnFailure(now time.Time, c Config, w Window, random func() float64) Breaker {
	switch b.State {
	case Closed:
		n := b
		n.Consecutive++
		n.Version++
		rate := w.Calls >= c.MinCalls && float64(w.Failures) >= c.ErrorRate*float64(w.Calls)
		if n.Consecutive >= c.ConsecutiveFailures || rate {
			return b.open(now, c, random)
		}
		return n
	case HalfOpen:
		return b.open(now, c, random) // the probe failed
	}
	return b // open: a call that was already out when it opened
}

// OnSuccess is the state after a call that succeeded.
func (b Breaker) OnSuccess() Breaker {
	switch {
	case b.State == HalfOpen, b.State == Closed && b.Consecutive > 0:
		return Breaker{State: Closed, Version: b.Version + 1}
	}
	return b // closed with no failures: nothing to change; open: a straggler
}

func (b Breaker) open(now time.Time, c Config, random func() float64) Breaker {
	spread := 1 + c.CooldownJitter*(2*random()-1)
	return Breaker{State: Open, OpenUntil: now.Add(time.Duration(float64(c.Cooldown) * spread)), Version: b.Version + 1}
}
