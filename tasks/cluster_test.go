package tasks_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// Everything agentq does runs on a Redis Cluster: each script touches one
// hash slot (a workflow's or a provider's), so nothing fails with
// CROSSSLOT. A chord with a fan-in, a key cooldown, a breaker that opens,
// health counts and a cancel, on three masters.
func TestRunsOnARedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node Redis Cluster")
	}
	e := testenv.Start(t, testenv.Options{Cluster: true, Scenario: chaosllm.Scenario{Timelines: []chaosllm.Timeline{
		{Key: testenv.Keys[0], Phases: []chaosllm.Phase{{Requests: 1, Fault: &chaosllm.Fault{Status: 429, RetryAfter: chaosllm.Duration(30 * time.Second)}}, {}}},
		{Endpoint: "anthropic", Phases: []chaosllm.Phase{{Fault: &chaosllm.Fault{Status: 503}}}},
	}}})
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, e.Submit(t, e.Spec(chordSpec(6))))
	}
	for _, id := range ids {
		wf := e.Wait(t, id, 30*time.Second, store.StateCompleted)
		if body := wf.Steps[6]; body.Attempts != 1 || body.State != store.StepDone {
			t.Fatalf("body %+v", body)
		}
	}
	ctx := context.Background()
	if ks, err := store.NewKeyState(e.Redis, nil).Load(ctx, []string{"oa"}); err != nil || len(ks["oa"]) != 1 {
		t.Fatalf("key state on the cluster: %+v %v", ks, err)
	}
	// the backup fails: its breaker opens (scripts on the provider's slot)
	for i := 0; i < breakerThreshold; i++ {
		id := e.Submit(t, e.Spec(step("main", "")))
		e.Wait(t, id, 10*time.Second, store.StateCompleted)
	}
	if err := e.Chaos.SetScenario(chaosllm.Scenario{Timelines: []chaosllm.Timeline{
		{Endpoint: "openai", Phases: []chaosllm.Phase{{Fault: &chaosllm.Fault{Status: 503}}}},
		{Endpoint: "anthropic", Phases: []chaosllm.Phase{{Fault: &chaosllm.Fault{Status: 503}}}}}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < breakerThreshold; i++ {
		id := e.Submit(t, e.Spec(step("main", ", max_retries: 0")))
		e.Wait(t, id, 10*time.Second, store.StateBlocked)
	}
	if b := breakerOf(t, e, "an", "m-an"); b.State.String() != "open" {
		t.Fatalf("backup breaker %+v on the cluster", b)
	}
	id := e.Submit(t, e.Spec(chordSpec(3)))
	if st, err := e.Client.Cancel(ctx, id); err != nil || st != store.StateCanceled {
		t.Fatalf("cancel on the cluster: %q %v", st, err)
	}
	if wfs, err := e.Client.List(ctx, "", 100); err != nil || len(wfs) < 12 {
		t.Fatalf("list on the cluster: %d %v", len(wfs), err)
	}
}
