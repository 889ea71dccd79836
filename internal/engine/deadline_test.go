package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/tasks"
)

// A workflow whose deadline passes while a step runs: the step's context
// ends at the deadline, the workflow ends timed_out naming its unfinished
// steps, and no step starts after it (not even an optional step's
// dependent).
func TestDeadlineEndsTheWorkflowTimedOut(t *testing.T) {
	var after atomic.Int32
	slowSaw := make(chan error, 1)
	e := testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{
		"quick": func(ctx context.Context, s *engine.CodeStep) (any, error) { return "ok", nil },
		"slow": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			select {
			case <-ctx.Done():
				slowSaw <- ctx.Err()
			case <-time.After(20 * time.Second):
				slowSaw <- errors.New("the step's context outlived the workflow's deadline")
			}
			return nil, ctx.Err()
		},
		"after": func(ctx context.Context, s *engine.CodeStep) (any, error) { after.Add(1); return "late", nil },
	}, Metrics: true})
	id := e.Submit(t, e.Spec(`name: bounded
deadline: 2s
steps:
  - { id: a, run: quick }
  - { id: b, run: slow, depends_on: [a], optional: true, timeout: 60s }
  - { id: c, run: after, depends_on: [b] }
`))
	start := time.Now()
	wf := e.Wait(t, id, 15*time.Second, store.StateTimedOut, store.StateCompleted, store.StateBlocked)
	if wf.State != store.StateTimedOut {
		t.Fatalf("state %s, want timed_out: %+v", wf.State, wf.Steps)
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("timed out after %s, want about 2s", took)
	}
	if err := <-slowSaw; !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		t.Errorf("the running step saw %v", err)
	}
	if !strings.Contains(wf.Error, "deadline passed") || !strings.Contains(wf.Error, "unfinished: b, c") {
		t.Errorf("error %q, want the unfinished steps named", wf.Error)
	}
	states := map[string]string{}
	for _, s := range wf.Steps {
		states[s.ID] = s.State
	}
	if states["a"] != store.StepDone || states["b"] != store.StepCanceled || states["c"] != store.StepCanceled {
		t.Errorf("step states %v", states)
	}
	if wf.DeadlineAt == nil || wf.FinishedAt == nil {
		t.Errorf("deadline %v finished %v", wf.DeadlineAt, wf.FinishedAt)
	}
	waitQueueEmpty(t, e)
	if n := after.Load(); n != 0 {
		t.Errorf("a step started after the deadline (%d times)", n)
	}
	// both the running step and the deadline's task end it; one counts it
	if got := workflowsMetric(t, e); got != `agentq_workflows_total{status="timed_out"} 1` {
		t.Errorf("the workflows metric: %s", got)
	}
}

// A workflow whose steps never run (their queue has no worker) still ends
// at its deadline: the scheduled deadline task ends it and deletes the
// waiting task. WithDeadline overrides the spec.
func TestDeadlineEndsAWorkflowNothingRuns(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Metrics: true})
	wspec := e.Spec("name: idle\ndeadline: 1h\nsteps:\n  - { id: s, route: solo, prompt: hi, queue: nobody }\n")
	id, err := e.Client.Submit(t.Context(), wspec, producer.WithDeadline(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	wf := e.Wait(t, id, 15*time.Second, store.StateTimedOut)
	if wf.DeadlineAt == nil || wf.DeadlineAt.Sub(wf.CreatedAt) > 2*time.Second {
		t.Errorf("deadline %v for a workflow created %v: WithDeadline(1s) not applied", wf.DeadlineAt, wf.CreatedAt)
	}
	// the state is written first, then the tasks are stopped: wait for that
	insp := asynq.NewInspectorFromRedisClient(e.Redis)
	poll.Until(t, 5*time.Second, func() (bool, string) {
		info, err := insp.GetTaskInfo("nobody", tasks.TaskID(id, "s"))
		if errors.Is(err, asynq.ErrTaskNotFound) {
			return true, ""
		}
		return false, fmt.Sprintf("the waiting step's task: %v %v, want deleted", info, err)
	})
	// the worker that ended it counts it, once
	poll.Until(t, 5*time.Second, func() (bool, string) {
		lines := workflowsMetric(t, e)
		return lines == `agentq_workflows_total{status="timed_out"} 1`, "the workflows metric: " + lines
	})
}

func TestDeadlineUnderASecondIsRefused(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	_, err := e.Client.Parse("d.yaml", []byte("name: d\ndeadline: 500ms\nsteps:\n  - { id: s, route: solo, prompt: hi }\n"))
	if err == nil || !strings.Contains(err.Error(), "deadline: 500ms is under 1s") {
		t.Fatalf("%v", err)
	}
}

// workflowsMetric is what the worker's /metrics says of agentq_workflows_total.
func workflowsMetric(t *testing.T, e *testenv.Env) string {
	t.Helper()
	resp, err := http.Get(e.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return grepLines(string(body), "agentq_workflows_total{")
}

// Every worker slot is held by step code that ignores its context, so the
// deadline's own task waits for a slot: an outcome that arrives past the
// deadline is not recorded, the workflow ends timed_out (it ended
// completed on outputs made after its deadline).
func TestADeadlineHoldsWhenEverySlotIsHeld(t *testing.T) {
	release := make(chan struct{})
	var started atomic.Int32
	e := testenv.Start(t, testenv.Options{NoWorker: true, Steps: map[string]engine.StepFunc{
		"hang": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			started.Add(1)
			<-release // ignores its context
			return "late", nil
		}}})
	e.Config.Worker.Concurrency = 2
	e.StartWorker(t)
	wspec := e.Spec("name: full\nsteps:\n  - { id: a, run: hang }\n  - { id: b, run: hang }\n")
	id, err := e.Client.Submit(t.Context(), wspec, producer.WithDeadline(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, func() (bool, string) { return started.Load() == 2, "the steps did not start" })
	var wf *store.Workflow
	poll.Until(t, 10*time.Second, func() (bool, string) {
		wf, err = e.Store.Get(t.Context(), id)
		return err == nil && wf.DeadlineAt != nil && time.Now().After(*wf.DeadlineAt), "deadline not passed"
	})
	close(release)
	wf = e.Wait(t, id, 20*time.Second, store.StateTimedOut, store.StateCompleted)
	if wf.State != store.StateTimedOut {
		t.Fatalf("workflow %s with steps %+v: want timed_out, nothing recorded past the deadline", wf.State, wf.Steps)
	}
	for _, s := range wf.Steps {
		if s.Output != "" {
			t.Errorf("step %s kept an output made past the deadline: %q", s.ID, s.Output)
		}
	}
}
