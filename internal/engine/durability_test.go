package engine_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// With redis.durability, a step whose settle the replica does not confirm
// is not acknowledged to asynq: its task comes back again and again while
// the replica is away, using none of the step's retries and never
// archived, and once the replica is back the step is confirmed and the
// workflow goes on. The provider is paid once. A submit while no replica
// confirms is told "not confirmed" with its key, and its retry with the
// key once the replica is back runs it once. The replica stays away for
// AGENTQ_DRILL_DETACH (make drill: minutes), or until the task came back
// three times.
func TestASettleNotConfirmedWaitsForTheReplicaWithoutUsingRetries(t *testing.T) {
	t.Parallel()
	primary, replicas := redistest.Replicated(t, 1)
	replica := replicas[0]
	e := testenv.Start(t, testenv.Options{RedisAddr: primary.Addr(),
		Durability: &config.Durability{Replicas: 1, Timeout: config.Duration(time.Second)}, // an in-sync replica confirms well within it on a loaded machine
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
	detachedAt := time.Now()
	var detach time.Duration
	if v := os.Getenv("AGENTQ_DRILL_DETACH"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("AGENTQ_DRILL_DETACH=%q: %v", v, err)
		}
		detach = d
	}
	// a submit while the replica is away: not confirmed, with its key
	_, err := e.Client.SubmitWorkflow(t.Context(), e.Spec("name: late\nsteps:\n  - { id: l, route: solo, prompt: \"late\" }\n"))
	var se *producer.SubmitError
	if !errors.As(err, &se) || !errors.Is(err, store.ErrNotConfirmed) || se.Key == "" {
		t.Fatalf("a submit with the replica away: %v, want a SubmitError, not confirmed, naming its key", err)
	}
	// the task comes back (every 2s) and is still not confirmed: three
	// times, and for as long as the replica is away
	unconfirmed := 0
	timeout := time.After(detach + 30*time.Second)
	for unconfirmed < 3 || time.Since(detachedAt) < detach {
		select {
		case ev := <-e.Events:
			if ev.Step == "s" && ev.State == "unconfirmed" {
				unconfirmed++
			}
		case <-timeout:
			t.Fatalf("%d unconfirmed settles reported in %s with the replica frozen, want 3 and more", unconfirmed, time.Since(detachedAt).Round(time.Second))
		}
	}
	t.Logf("replica away %s: the step's settle not confirmed %d times", time.Since(detachedAt).Round(time.Second), unconfirmed)
	info, err := asynq.NewInspectorFromRedisClient(e.Redis).GetTaskInfo("default", flow.StepTaskID(id, "s", 0))
	if err != nil {
		t.Fatalf("the step's task while its settle is not confirmed: %v (want it kept, not acknowledged)", err)
	}
	if info.Retried != 0 {
		t.Fatalf("the step's task was retried %d times as a failure, want 0: waiting for a replica uses no retry", info.Retried)
	}
	if info.State == asynq.TaskStateArchived {
		t.Fatal("the step's task was archived while its settle was not confirmed")
	}
	replica.Thaw()
	thawed = true
	thawedAt := time.Now()
	wf := e.Wait(t, id, 30*time.Second, store.StateCompleted)
	t.Logf("the workflow completed %s after the replica came back", time.Since(thawedAt).Round(time.Millisecond))
	late, err := e.Client.SubmitWorkflow(t.Context(), e.Spec("name: late\nsteps:\n  - { id: l, route: solo, prompt: \"late\" }\n"), producer.WithIdempotencyKey(se.Key))
	if err != nil {
		t.Fatalf("the submit retried with its key %s: %v", se.Key, err)
	}
	if late.ID != se.Workflow {
		t.Fatalf("the retried submit is workflow %s, the first one named %s", late.ID, se.Workflow)
	}
	e.Wait(t, late.ID, 30*time.Second, store.StateCompleted)
	if n := e.Chaos.Snapshot().Count("openai", "", "ok"); n != 3 {
		t.Fatalf("%d answers for three steps, want 3: an unconfirmed answer is confirmed, not bought again", n)
	}
	if wf.Steps[0].State != store.StepDone || wf.Steps[1].State != store.StepDone {
		t.Fatalf("steps %+v, want both done", wf.Steps)
	}
}
