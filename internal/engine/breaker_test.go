package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/retry"
)

// testenv's breaker: 3 failures in a row open it for 2s × 0.8 (the worker's
// random source returns 0, the low end of the ±20% spread).
const (
	breakerThreshold = 3
	breakerCooldown  = 1600 * time.Millisecond
)

func primaryResets() chaosllm.Scenario {
	return chaosllm.Scenario{Timelines: []chaosllm.Timeline{
		{Endpoint: "openai", Phases: []chaosllm.Phase{{Fault: &chaosllm.Fault{Kind: chaosllm.KindReset}}}}}}
}

func TestOpenBreakerStopsCallsUntilOneProbe(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: primaryResets()})
	runOne := func() string {
		id := e.Submit(t, e.Spec(step("main", "")))
		wf := e.Wait(t, id, 10*time.Second, store.StateCompleted)
		return wf.Steps[0].Target
	}
	resets := func() int { return e.Chaos.Snapshot().Count("openai", "", "reset") }
	// each step fails over to the backup within its attempt; the third
	// failure in a row opens the primary's breaker
	for i := 0; i < 10; i++ {
		if got := runOne(); got != "an/m-an" {
			t.Fatalf("step %d answered by %s", i, got)
		}
	}
	if n := resets(); n != breakerThreshold {
		t.Fatalf("the dead primary got %d calls, want %d (the threshold, then none while open)", n, breakerThreshold)
	}
	// after the cooldown exactly one probe goes (the workers' active prober
	// sends it) and fails: open again, so the steps after it call nothing
	poll.Until(t, 3*breakerCooldown, func() (bool, string) {
		return resets() >= breakerThreshold+1, "no probe within three cooldowns"
	})
	for i := 0; i < 5; i++ {
		runOne()
	}
	if n := resets(); n != breakerThreshold+1 {
		t.Fatalf("after the cooldown the primary got %d calls in all, want %d (one probe)", n, breakerThreshold+1)
	}
	// the primary recovers: the next probe closes the breaker and traffic returns
	if err := e.Chaos.SetScenario(chaosllm.Scenario{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 3*breakerCooldown, func() (bool, string) {
		return runOne() == "oa/m-oa", "traffic did not return to the recovered primary"
	})
	for i := 0; i < 3; i++ {
		if got := runOne(); got != "oa/m-oa" {
			t.Fatalf("after recovery step answered by %s", got)
		}
	}
}

func TestThreeWorkersSendTheDeadPrimaryABoundedNumberOfCalls(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: primaryResets()})
	e.StartAnotherWorker(t)
	e.StartAnotherWorker(t)
	batch := func(n int) time.Duration {
		start := time.Now()
		var ids []string
		for i := 0; i < n; i++ {
			ids = append(ids, e.Submit(t, e.Spec(step("main", ""))))
		}
		for _, id := range ids {
			e.Wait(t, id, 20*time.Second, store.StateCompleted)
		}
		return time.Since(start)
	}
	resets := func() int { return e.Chaos.Snapshot().Count("openai", "", "reset") }
	// Before the first failure comes back nobody knows the primary is dead:
	// the calls already in flight then (at most one per worker slot, 3 × 8)
	// fail too. After that the breaker is open for every worker.
	el1 := batch(60)
	first := resets()
	inFlight := 3*e.Config.Worker.Concurrency - 1
	t.Logf("first 60 steps on 3 workers (%s): the dead primary got %d calls (threshold %d, at most %d more already in flight)", el1, first, breakerThreshold, inFlight)
	if first > breakerThreshold+inFlight {
		t.Fatalf("the dead primary got %d calls, want at most %d", first, breakerThreshold+inFlight)
	}
	// however many more steps run, it gets one probe per cooldown at most
	el2 := batch(180)
	more := resets() - first
	probes := int((el1+el2)/breakerCooldown) + 1
	t.Logf("180 more steps (%s): %d more calls (at most %d probes)", el2, more, probes)
	if more > probes {
		t.Fatalf("%d more calls reached the dead primary, want at most %d probes", more, probes)
	}
	if b := breakerOf(t, e, "oa", "m-oa"); b.State == breaker.Closed {
		t.Fatalf("breaker %+v, want open or half-open", b)
	}
}

func breakerOf(t *testing.T, e *testenv.Env, provider, model string) breaker.Breaker {
	t.Helper()
	st, err := store.NewBreakers(e.Redis).Load(context.Background(), []string{provider})
	if err != nil {
		t.Fatal(err)
	}
	return st[provider][model]
}

// A failing primary loses its traffic to the backup; once it recovers, its
// share comes back within the breaker's cooldown and one health window
// (testenv: 1.6s and 10s), gradually.
func TestRecoveredPrimaryWinsItsShareBack(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for a health window")
	}
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Timelines: []chaosllm.Timeline{
		{Endpoint: "openai", Phases: []chaosllm.Phase{{Fault: &chaosllm.Fault{Status: 500}}}}}}})
	share := func(n int) float64 {
		primary := 0
		for i := 0; i < n; i++ {
			id := e.Submit(t, e.Spec(step("scored", "")))
			if wf := e.Wait(t, id, 10*time.Second, store.StateCompleted); wf.Steps[0].Target == "oa/m-oa" {
				primary++
			}
		}
		return float64(primary) / float64(n)
	}
	if s := share(20); s != 0 {
		t.Fatalf("the failing primary answered %.0f%% of steps", 100*s)
	}
	if err := e.Chaos.SetScenario(chaosllm.Scenario{}); err != nil {
		t.Fatal(err)
	}
	mean := func(xs []float64) float64 {
		s := 0.0
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	// traffic until the primary has its share back, judged by samples, not
	// by the clock: on a loaded machine a sample takes longer, and a fixed
	// window held too few of them (flaky at load average 10)
	var shares []float64
	deadline := time.Now().Add(breakerCooldown + 60*time.Second)
	for len(shares) < 6 || mean(shares[len(shares)-3:]) < 0.3 {
		if time.Now().After(deadline) {
			t.Fatalf("the primary did not win its share back (≥ 30%% of 30 steps) within %s of recovering: shares per 10 steps %v",
				breakerCooldown+60*time.Second, shares)
		}
		shares = append(shares, share(10))
	}
	t.Logf("primary's share per 10 steps after recovery: %v", shares)
	if first, last := shares[0], mean(shares[len(shares)-3:]); first >= last {
		t.Errorf("the share did not grow: the first sample's %.2f, the last three's %.2f", first, last)
	}
}

// With no user traffic at all, an open target that recovered is closed
// again by the workers' own probes.
func TestActiveProbeClosesARecoveredTargetWithoutTraffic(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: primaryResets()})
	for i := 0; i < breakerThreshold; i++ {
		id := e.Submit(t, e.Spec(step("main", "")))
		e.Wait(t, id, 10*time.Second, store.StateCompleted)
	}
	if b := breakerOf(t, e, "oa", "m-oa"); b.State != breaker.Open {
		t.Fatalf("breaker %+v, want open", b)
	}
	if err := e.Chaos.SetScenario(chaosllm.Scenario{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, breakerCooldown+3*time.Second, func() (bool, string) {
		b := breakerOf(t, e, "oa", "m-oa")
		return b.State == breaker.Closed, fmt.Sprintf("not closed by an active probe: %+v", b)
	})
	// one tiny chat call closed it: the probe, and nothing else
	if st := e.Chaos.Snapshot(); st.Count("openai", "", "ok") != 1 || st.Count("anthropic", "", "") != breakerThreshold {
		t.Fatalf("want exactly one probe and no other traffic: %+v", st.Calls)
	}
}

// The same drill with a primary that refuses connections (its listener is
// closed), counted by the workers' own call log: chaosllm never sees a
// refused call.
func TestRefusingPrimaryIsCalledThresholdTimesThenProbedOnce(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Name: "refusing", Duration: chaosllm.Duration(time.Hour), Fault: &chaosllm.Fault{Kind: chaosllm.KindRefuse}}}}})
	poll.Until(t, 5*time.Second, func() (bool, string) {
		return e.Chaos.Refusing(), "chaosllm is not refusing connections"
	})
	// anthropic is refused too (one listener): route main's backup fails,
	// so steps retry; count only the primary's calls
	primary := func() int { return e.Calls.Count("oa/m-oa", "") }
	for i := 0; i < 5; i++ { // one after another: no call is in flight when the breaker opens
		id := e.Submit(t, e.Spec(step("main", ", max_retries: 0")))
		e.Wait(t, id, 10*time.Second, store.StateBlocked)
	}
	if n, net := primary(), e.Calls.Count("oa/m-oa", retry.Network); n != breakerThreshold || net != n {
		t.Fatalf("the refusing primary got %d calls (%d network failures), want %d", n, net, breakerThreshold)
	}
	opened := time.Now()
	time.Sleep(time.Until(opened.Add(breakerCooldown + 500*time.Millisecond))) //nolint: waiting out a cooldown
	for i := 0; i < 5; i++ {
		id := e.Submit(t, e.Spec(step("main", ", max_retries: 0")))
		e.Wait(t, id, 10*time.Second, store.StateBlocked)
	}
	if n := primary(); n != breakerThreshold+1 {
		t.Fatalf("after one cooldown the primary got %d calls in all, want %d (one probe)", n, breakerThreshold+1)
	}
}
