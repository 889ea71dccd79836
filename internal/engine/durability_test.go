package engine_test

import (
	"context"

	"github.com/hibiken/asynq"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// With redis.durability, a step whose settle the replica does not confirm
// is not acknowledged to asynq: its task comes back again and again while
// the replica is away, using none of the step's retries and never
// archived, and once the replica is back the step is confirmed and the
// workflow goes on. The provider is paid once.
func TestASettleNotConfirmedWaitsForTheReplicaWithoutUsingRetries(t *testing.T) {
	t.Parallel()
	primary, replicas := redistest.Replicated(t, 1)
	replica := replicas[0]
	e := testenv.Start(t, testenv.Options{RedisAddr: primary.Addr(),
		Durability: &config.Durability{Replicas: 1, Timeout: config.Duration(200 * time.Millisecond)},
		Scenario:   chaosllm.Scenario{Phases: []chaosllm.Phase{{Latency: chaosllm.Fixed(time.Second)}}}})
	id := e.Submit(t, e.Spec("name: two\nsteps:\n  - { id: s, route: solo, prompt: \"hello\" }\n  - { id: after, route: solo, prompt: \"again\", depends_on: [s] }\n"))
	poll.Until(t, 10*time.Second, func() (bool, string) {
		wf, err := e.Store.Get(context.Background(), id)
		return err == nil && wf.Steps[0].State == store.StepRunning, "the step never started"
	})
	replica.Freeze()
	thawed := false
	defer func() {
		if !thawed {
			replica.Thaw()
		}
	}()
	// the task comes back (every 2s) and is still not confirmed: three times
	unconfirmed := 0
	timeout := time.After(30 * time.Second)
	for unconfirmed < 3 {
		select {
		case ev := <-e.Events:
			if ev.Step == "s" && ev.State == "unconfirmed" {
				unconfirmed++
			}
		case <-timeout:
			t.Fatalf("%d unconfirmed settles reported in 30s with the replica frozen, want 3", unconfirmed)
		}
	}
	info, err := asynq.NewInspectorFromRedisClient(e.Redis).GetTaskInfo("default", flow.StepTaskID(id, "s", 0))
	if err != nil {
		t.Fatalf("the step's task while its settle is not confirmed: %v (want it kept, not acknowledged)", err)
	}
	if info.Retried != 0 {
		t.Fatalf("the step's task was retried %d times as a failure, want 0: waiting for a replica uses no retry", info.Retried)
	}
	replica.Thaw()
	thawed = true
	wf := e.Wait(t, id, 30*time.Second, store.StateCompleted)
	if n := e.Chaos.Snapshot().Count("openai", "", "ok"); n != 2 {
		t.Fatalf("%d answers for two steps, want 2: an unconfirmed answer is confirmed, not bought again", n)
	}
	if wf.Steps[0].State != store.StepDone || wf.Steps[1].State != store.StepDone {
		t.Fatalf("steps %+v, want both done", wf.Steps)
	}
}
