package breaker_test

import (
	"testing"
	"time"

	"github.com/agentq/agentq/internal/breaker"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func mid() float64 { return 0.5 } // no cooldown jitter

func TestBreakerTransitions(t *testing.T) {
	c := breaker.DefaultConfig
	var b breaker.Breaker
	if b.Allow(t0) != breaker.Pass || b.State.String() != "closed" {
		t.Fatal("the zero breaker is closed")
	}
	// closed: failures count up, a success resets them
	for i := 1; i <= 4; i++ {
		b = b.OnFailure(t0, c, breaker.Window{Calls: i, Failures: i}, mid)
		if b.State != breaker.Closed || b.Consecutive != i {
			t.Fatalf("failure %d: %+v", i, b)
		}
	}
	b = b.OnSuccess()
	if b.State != breaker.Closed || b.Consecutive != 0 {
		t.Fatalf("success: %+v", b)
	}
	// closed → open on the fifth failure in a row
	for i := 1; i <= 5; i++ {
		b = b.OnFailure(t0, c, breaker.Window{Calls: 100, Failures: i}, mid)
	}
	if b.State != breaker.Open || !b.OpenUntil.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("after 5 failures: %+v", b)
	}
	// open: denied until the cooldown ends, then one probe
	if b.Allow(t0.Add(29*time.Second)) != breaker.Deny {
		t.Fatal("open breaker let a call through")
	}
	if b.Allow(t0.Add(30*time.Second)) != breaker.Probe {
		t.Fatal("no probe after the cooldown")
	}
	// a failure of a call that was out when it opened changes nothing
	if n := b.OnFailure(t0.Add(time.Second), c, breaker.Window{}, mid); n != b {
		t.Fatalf("straggler failure changed an open breaker: %+v", n)
	}
	// open → half-open: the probe takes the slot; everyone else is denied
	now := t0.Add(31 * time.Second)
	h := b.StartProbe(now, c)
	if h.State != breaker.HalfOpen || h.Allow(now) != breaker.Deny || h.Version <= b.Version {
		t.Fatalf("half-open: %+v", h)
	}
	// a probe that never reports back frees the slot after its timeout
	if h.Allow(now.Add(time.Minute)) != breaker.Probe {
		t.Fatal("a lost probe's slot never frees")
	}
	// half-open → closed on the probe's success
	if c2 := h.OnSuccess(); c2.State != breaker.Closed || c2.Consecutive != 0 || c2.Allow(now) != breaker.Pass {
		t.Fatalf("probe success: %+v", c2)
	}
	// half-open → open again on the probe's failure, for a new cooldown
	if o := h.OnFailure(now, c, breaker.Window{}, mid); o.State != breaker.Open || !o.OpenUntil.Equal(now.Add(30*time.Second)) {
		t.Fatalf("probe failure: %+v", o)
	}
}

func TestBreakerOpensOnErrorRate(t *testing.T) {
	c := breaker.DefaultConfig
	var b breaker.Breaker
	// 4 failures in a row is under the threshold, but 5 of 9 calls is under min calls
	b = b.OnSuccess().OnFailure(t0, c, breaker.Window{Calls: 9, Failures: 5}, mid)
	if b.State != breaker.Closed {
		t.Fatalf("opened under min calls: %+v", b)
	}
	b = b.OnFailure(t0, c, breaker.Window{Calls: 10, Failures: 5}, mid)
	if b.State != breaker.Open {
		t.Fatalf("did not open at 50%% of 10 calls: %+v", b)
	}
}

func TestBreakerCooldownJitterBounds(t *testing.T) {
	c := breaker.DefaultConfig
	for _, r := range []float64{0, 0.25, 0.999} {
		b := breaker.Breaker{}.OnFailure(t0, breaker.Config{ConsecutiveFailures: 1, ErrorRate: 1, Window: time.Second,
			Cooldown: c.Cooldown, CooldownJitter: 0.2, ProbeTimeout: time.Second}, breaker.Window{}, func() float64 { return r })
		if d := b.OpenUntil.Sub(t0); d < 24*time.Second || d >= 36*time.Second {
			t.Errorf("random %v: cooldown %s outside [24s, 36s)", r, d)
		}
	}
	if err := (breaker.Config{}).Validate(); err == nil {
		t.Error("the zero config validated")
	}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
}
