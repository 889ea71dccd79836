package tasks_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/tasks"
)

// A finished workflow rerun from a step: the steps before it keep their
// outputs and do not run again; the step and everything downstream run
// again (durable calls cleared: the function runs, not a replay), in the
// next generation's tasks, beside the ids asynq kept of the first run.
func TestRerunFromAStep(t *testing.T) {
	var mu sync.Mutex
	runs := map[string]int{}
	count := func(id string) tasks.StepFunc {
		return func(ctx context.Context, s *tasks.CodeStep) (any, error) {
			mu.Lock()
			runs[id]++
			n := runs[id]
			mu.Unlock()
			// a durable sub-call: a rerun must run it again, not replay the first run's
			return tasks.Do(ctx, s, "count", func(ctx context.Context) (int, error) { return n, nil })
		}
	}
	e := testenv.Start(t, testenv.Options{Steps: map[string]tasks.StepFunc{"a": count("a"), "b": count("b"), "c": count("c")}})
	id := e.Submit(t, e.Spec(`name: rerun
steps:
  - { id: a, run: a }
  - { id: b, run: b, depends_on: [a] }
  - { id: c, run: c, depends_on: [b] }
`))
	e.Wait(t, id, 20*time.Second, store.StateCompleted)
	if _, err := e.Client.Rerun(t.Context(), id, "nope"); !errors.Is(err, tasks.ErrInvalidSpec) {
		t.Fatalf("rerun from an unknown step: %v", err)
	}
	gen, err := e.Client.Rerun(t.Context(), id, "b")
	if err != nil || gen != 1 {
		t.Fatalf("rerun: %d %v", gen, err)
	}
	wf := e.Wait(t, id, 20*time.Second, store.StateCompleted)
	mu.Lock()
	got := [3]int{runs["a"], runs["b"], runs["c"]}
	mu.Unlock()
	if got != [3]int{1, 2, 2} {
		t.Fatalf("runs a, b, c = %v, want a once and b, c twice", got)
	}
	if wf.Generation != 1 || wf.Steps[0].Output != "1" || wf.Steps[1].Output != "2" || wf.Steps[2].Output != "2" || wf.Steps[1].Attempts != 1 {
		t.Fatalf("after the rerun: generation %d, steps %+v", wf.Generation, wf.Steps)
	}
	insp := asynq.NewInspectorFromRedisClient(e.Redis)
	for _, tid := range []string{tasks.TaskID(id, "b"), tasks.TaskID(id, "b") + "@1", tasks.TaskID(id, "c") + "@1"} {
		if _, err := insp.GetTaskInfo("default", tid); err != nil {
			t.Errorf("task %s: %v", tid, err)
		}
	}
	// a leftover task of the first run does nothing
	if _, err := e.Asynq.Enqueue(asynq.NewTask(tasks.TypeStep, []byte(`{"wf":"`+id+`","step":"c"}`), asynq.TaskID(id+":c:stray"))); err != nil {
		t.Fatal(err)
	}
	waitQueueEmpty(t, e)
	if w, _ := e.Store.Get(t.Context(), id); w.Steps[2].Attempts != 1 || w.Steps[2].Output != "2" {
		t.Errorf("a task of the first run touched step c: %+v", w.Steps[2])
	}
}

func TestRerunOfARunningWorkflowIsRefused(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	id := e.Submit(t, e.Spec("name: r\nsteps:\n  - { id: s, route: solo, prompt: hi }\n"))
	if _, err := e.Client.Rerun(t.Context(), id, "s"); !errors.Is(err, tasks.ErrNotFinished) {
		t.Fatalf("rerun of a pending workflow: %v", err)
	}
}
