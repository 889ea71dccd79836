package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/retry"
)

// A step's task that runs before its input is settled in the workflow's
// record (on a Cluster, a promotion of the record's primary lost the
// input's settle after the dependent's task was enqueued on the queue's)
// does not start: no attempt, no call, no retry used, never archived; it
// looks again every 2 s and runs once, on the input's output, when the
// input settles. Here the dependent's task is enqueued by hand while its
// input still runs, as the lost settle leaves it.
func TestAStepWhoseInputIsNotSettledWaitsForIt(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{{Latency: chaosllm.Fixed(3 * time.Second)}}}})
	wspec := e.Spec("name: two\nsteps:\n  - { id: s, route: solo, prompt: \"first\" }\n  - { id: after, route: solo, prompt: \"then {{ .Steps.s.Output }}\", depends_on: [s] }\n")
	id := e.Submit(t, wspec)
	poll.Until(t, 10*time.Second, func() (bool, string) {
		wf, err := e.Store.Get(context.Background(), id)
		return err == nil && wf.Steps[0].State == store.StepRunning, "the first step never started"
	})
	st := &wspec.Steps[1]
	task, err := flow.NewTask(id, st.ID, 0, wspec, st, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Asynq.Enqueue(task); err != nil {
		t.Fatal(err)
	}
	// the dependent's task reports unready until the input settles, and
	// starts only after that
	unready, inputDone := 0, false
	timeout := time.After(30 * time.Second)
	for done := false; !done; {
		select {
		case ev := <-e.Events:
			switch {
			case ev.Step == "s" && ev.State == store.StepDone:
				inputDone = true
			case ev.Step == "after" && ev.Class == retry.Unready:
				unready++
			case ev.Step == "after" && ev.State == store.StepRunning && !inputDone:
				t.Fatalf("the dependent started before its input settled: %+v", ev)
			case ev.Step == "after" && ev.State == store.StepDone:
				done = true
			}
		case <-timeout:
			t.Fatalf("the dependent did not end in 30s (%d unready looks, input done: %t)", unready, inputDone)
		}
	}
	if unready == 0 {
		t.Fatal("the dependent's task ran before its input settled, but no unready look was reported")
	}
	info, err := asynq.NewInspectorFromRedisClient(e.Redis).GetTaskInfo(flow.QueuedTask(id, st.ID, 0, wspec, st, time.Hour).Queue, flow.StepTaskID(id, "after", 0))
	if err != nil || info.Retried != 0 {
		t.Fatalf("the dependent's task: %+v %v, want it retried 0 times as a failure", info, err)
	}
	wf := e.Wait(t, id, 30*time.Second, store.StateCompleted)
	if a := wf.Steps[1]; a.State != store.StepDone || a.Attempts != 1 || !strings.HasSuffix(a.Output, "then "+wf.Steps[0].Output) {
		t.Fatalf("the dependent: %+v, want one attempt on its input's output", a)
	}
	if n := e.Chaos.Snapshot().Count("openai", "", "ok"); n != 2 {
		t.Fatalf("%d answers for two steps, want 2", n)
	}
}
