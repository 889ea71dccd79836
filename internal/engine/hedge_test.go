package engine_test

import (
	"sort"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// A primary that stops answering costs a step no more than its usual p95
// before the backup is asked: step latency stays under twice the healthy
// p99.
func TestHedgeKeepsLatencyWhenThePrimaryHangs(t *testing.T) {
	healthy := chaosllm.Scenario{Timelines: []chaosllm.Timeline{
		{Endpoint: "openai", Phases: []chaosllm.Phase{{Latency: chaosllm.Fixed(100 * time.Millisecond)}}},
		{Endpoint: "anthropic", Phases: []chaosllm.Phase{{Latency: chaosllm.Fixed(20 * time.Millisecond)}}}}}
	e := testenv.Start(t, testenv.Options{Scenario: healthy})
	stepLatency := func() (time.Duration, string) {
		id := e.Submit(t, e.Spec(step("hedged", "")))
		wf := e.Wait(t, id, 10*time.Second, store.StateCompleted)
		s := wf.Steps[0]
		return s.FinishedAt.Sub(*s.StartedAt), s.Target
	}
	var lat []time.Duration
	for i := 0; i < 30; i++ {
		d, target := stepLatency()
		if target != "oa/m-oa" {
			t.Fatalf("healthy step %d answered by %s (hedged too early?)", i, target)
		}
		lat = append(lat, d)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p99 := lat[len(lat)-1]
	// the hedge needs the primary's p95: wait until the worker's health
	// beat has stored the healthy calls (it computes the percentiles from
	// what it just stored, in the same beat)
	poll.Until(t, 5*time.Second, func() (bool, string) {
		return storedCalls(t, e, "oa", "m-oa") >= int64(len(lat)), "the health beat did not store the primary's calls within 5s"
	})
	hang := chaosllm.Scenario{Timelines: []chaosllm.Timeline{
		{Endpoint: "openai", Phases: []chaosllm.Phase{{Fault: &chaosllm.Fault{Kind: chaosllm.KindHang}}}},
		{Endpoint: "anthropic", Phases: []chaosllm.Phase{{Latency: chaosllm.Fixed(20 * time.Millisecond)}}}}}
	if err := e.Chaos.SetScenario(hang); err != nil {
		t.Fatal(err)
	}
	var worst time.Duration
	for i := 0; i < 10; i++ {
		d, target := stepLatency()
		if target != "an/m-an" {
			t.Fatalf("step %d answered by %s while the primary hangs", i, target)
		}
		worst = max(worst, d)
	}
	t.Logf("healthy step p99 %s; worst step while the primary hangs %s", p99, worst)
	if worst >= 2*p99 {
		t.Fatalf("worst step %s, want under 2 × healthy p99 (%s)", worst, 2*p99)
	}
}

// A provider's max_concurrency holds across the worker's eight slots: no
// more calls reach it at once, and none is lost (the others wait their turn
// without using a retry).
func TestMaxConcurrencyIsNeverExceeded(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Latency: chaosllm.Fixed(300 * time.Millisecond)}}}})
	var ids []string
	for i := 0; i < 8; i++ {
		ids = append(ids, e.Submit(t, e.Spec(step("limited", ""))))
	}
	for _, id := range ids {
		if wf := e.Wait(t, id, 30*time.Second, store.StateCompleted); wf.Steps[0].State != store.StepDone {
			t.Fatalf("step %+v", wf.Steps[0])
		}
	}
	st := e.Chaos.Snapshot()
	if st.PeakInFlight["anthropic"] != 2 || st.Count("anthropic", "", "ok") != 8 {
		t.Fatalf("peak in flight %d (want 2), answers %d (want 8)", st.PeakInFlight["anthropic"], st.Count("anthropic", "", "ok"))
	}
}

// storedCalls sums a target's calls over the health buckets in Redis.
func storedCalls(t *testing.T, e *testenv.Env, provider, model string) int64 {
	t.Helper()
	keys, err := e.Redis.Keys(t.Context(), store.Prefix+"{prov:"+provider+"}:health:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, k := range keys {
		v, _ := e.Redis.HGet(t.Context(), k, model+"|calls").Int64()
		n += v
	}
	return n
}
