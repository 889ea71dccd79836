package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/spec"
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
	count := func(id string) engine.StepFunc {
		return func(ctx context.Context, s *engine.CodeStep) (any, error) {
			mu.Lock()
			runs[id]++
			n := runs[id]
			mu.Unlock()
			// a durable sub-call: a rerun must run it again, not replay the first run's
			return engine.Do(ctx, s, "count", func(ctx context.Context) (int, error) { return n, nil })
		}
	}
	e := testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{"a": count("a"), "b": count("b"), "c": count("c")}})
	id := e.Submit(t, e.Spec(`name: rerun
steps:
  - { id: a, run: a }
  - { id: b, run: b, depends_on: [a] }
  - { id: c, run: c, depends_on: [b] }
`))
	e.Wait(t, id, 20*time.Second, store.StateCompleted)
	if _, err := e.Client.Rerun(t.Context(), id, "nope"); !errors.Is(err, spec.ErrInvalidSpec) {
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
	// the log: b's durable call once a run, the rerun between the runs,
	// a's call in the first run only; the stray task logged nothing
	var lines []string
	evs, _ := e.Store.Events(t.Context(), id, "", 100)
	for _, ev := range evs {
		switch ev.Type {
		case record.EventDo, record.EventRerun, record.EventEnded:
			lines = append(lines, fmt.Sprintf("%s %s%s", ev.Type, ev.Step, ev.Name))
		}
	}
	if want := "do.call acount do.call bcount do.call ccount workflow.ended  workflow.rerun  do.call bcount do.call ccount workflow.ended "; strings.Join(lines, " ") != want {
		t.Errorf("log %q\nwant %q", strings.Join(lines, " "), want)
	}
}

func TestRerunOfARunningWorkflowIsRefused(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	id := e.Submit(t, e.Spec("name: r\nsteps:\n  - { id: s, route: solo, prompt: hi }\n"))
	if _, err := e.Client.Rerun(t.Context(), id, "s"); !errors.Is(err, producer.ErrNotFinished) {
		t.Fatalf("rerun of a pending workflow: %v", err)
	}
}

// ranTwice fails unless each of the first n items ran twice: once a run.
func ranTwice(t *testing.T, mu *sync.Mutex, ran map[int]int, n int) {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		if ran[i] != 2 {
			t.Errorf("item %d ran %d times, want twice (once a run)", i, ran[i])
		}
	}
}

// intStep returns a code step that outputs its input step's output (an
// integer) times ten plus one, or n for a step without input, and counts
// its runs.
func intStep(mu *sync.Mutex, runs map[string]int, from string) engine.StepFunc {
	return func(ctx context.Context, s *engine.CodeStep) (any, error) {
		mu.Lock()
		runs[s.ID()]++
		n := runs[s.ID()]
		mu.Unlock()
		if from == "" {
			return n, nil
		}
		v, ok := s.Step(from)
		in, err := strconv.Atoi(v.Output)
		if !ok || err != nil {
			return nil, fmt.Errorf("step %s ran without its input %s (%q)", s.ID(), from, v.Output)
		}
		return in*10 + 1, nil
	}
}

// A rerun from the first step of a chain: each downstream step waits for
// its input's new output, as in a first run (they were made ready at once,
// on empty inputs, and the workflow completed on results computed from
// nothing).
func TestRerunDownstreamWaitsForItsInputs(t *testing.T) {
	var mu sync.Mutex
	runs := map[string]int{}
	e := testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{
		"a": intStep(&mu, runs, ""), "b": intStep(&mu, runs, "a"), "c": intStep(&mu, runs, "b")}})
	id := e.Submit(t, e.Spec(`name: chain
steps:
  - { id: a, run: a }
  - { id: b, run: b, depends_on: [a] }
  - { id: c, run: c, depends_on: [b] }
`))
	wf := e.Wait(t, id, 20*time.Second, store.StateCompleted)
	if out := [3]string{wf.Steps[0].Output, wf.Steps[1].Output, wf.Steps[2].Output}; out != [3]string{"1", "11", "111"} {
		t.Fatalf("first run: %v", out)
	}
	// right after the rerun, only a is ready: b and c wait for their inputs
	if _, err := e.Client.Rerun(t.Context(), id, "a"); err != nil {
		t.Fatal(err)
	}
	wf = e.Wait(t, id, 20*time.Second, store.StateCompleted)
	if out := [3]string{wf.Steps[0].Output, wf.Steps[1].Output, wf.Steps[2].Output}; out != [3]string{"2", "21", "211"} {
		t.Fatalf("after rerun --from a: outputs %v, want 2, 21, 211 (each step on its input's new output)", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if runs["a"] != 2 || runs["b"] != 2 || runs["c"] != 2 {
		t.Fatalf("runs %v, want each step twice", runs)
	}
}

// The store makes ready, at a rerun, only the steps whose inputs are all
// settled and not run again.
func TestRerunQueuesOnlyStepsWhoseInputsAreSettled(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	id := e.Submit(t, e.Spec(`name: chain
steps:
  - { id: a, run: a }
  - { id: b, run: b, depends_on: [a] }
  - { id: c, run: c, depends_on: [b, a] }
`))
	// the first run, settled by hand
	for _, s := range []string{"a", "b", "c"} {
		if _, err := e.Store.Settle(t.Context(), id, s, store.Outcome{Done: true, Output: "1"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	gen, ready, err := e.Store.Rerun(t.Context(), id, []string{"b", "c"}, map[string][]string{"b": {"a"}, "c": {"b", "a"}}, nil)
	if err != nil || gen != 1 || !slices.Equal(ready, []string{"b"}) {
		t.Fatalf("rerun from b: generation %d, ready %q, %v; want 1, [b]", gen, ready, err)
	}
	w, err := e.Store.Get(t.Context(), id)
	if err != nil || w.Steps[2].State != store.StepPending {
		t.Fatalf("c after the rerun: %+v %v, want pending until b settles", w.Steps[2], err)
	}
}

// A map rerun: its reduce waits for every instance of the new run.
func TestRerunOfAMapWaitsForItsInstances(t *testing.T) {
	var mu sync.Mutex
	ran := map[int]int{}
	e := testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{
		"item": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			mu.Lock()
			ran[s.Index()]++
			mu.Unlock()
			return s.Index(), nil
		},
		"sum": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			n := 0
			for v, err := range s.Outputs(ctx, "m") {
				if err != nil || v.Missing {
					return nil, fmt.Errorf("output: %v %+v", err, v)
				}
				n++
			}
			return n, nil
		}}})
	id := e.Submit(t, e.Spec(`name: map
input: { items: [`+strings.TrimSuffix(strings.Repeat(`1, `, 60), ", ")+`] }
steps:
  - { id: m, for_each: "{{ .Input.items }}", max_parallel: 8, run: item }
  - { id: r, run: sum, depends_on: [m] }
`))
	e.Wait(t, id, 30*time.Second, store.StateCompleted)
	if _, err := e.Client.Rerun(t.Context(), id, "m"); err != nil {
		t.Fatal(err)
	}
	wf := e.Wait(t, id, 30*time.Second, store.StateCompleted)
	if wf.Steps[1].Output != "60" {
		t.Fatalf("the reduce after the rerun read %s outputs, want 60", wf.Steps[1].Output)
	}
	ranTwice(t, &mu, ran, 60)
}

// A blocked workflow whose map still runs is not rerun (an instance of the
// earlier run would settle into the new one); once its steps stop it is,
// and every item of the map runs in the new run.
func TestRerunOfABlockedWorkflowWaitsForItsStepsInFlight(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	ran := map[int]int{}
	var failOnce atomic.Bool
	e := testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{
		"hold": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			mu.Lock()
			ran[s.Index()]++
			first := ran[s.Index()] == 1
			mu.Unlock()
			if first && s.Index() < 4 {
				<-release
			}
			return s.Index(), nil
		},
		"bad": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			if failOnce.CompareAndSwap(false, true) {
				return nil, engine.ToDeadLetter(errors.New("bad input"))
			}
			return "ok", nil
		}}})
	id := e.Submit(t, e.Spec(`name: blocked
input: { items: [`+strings.TrimSuffix(strings.Repeat(`1, `, 40), ", ")+`] }
steps:
  - { id: m, for_each: "{{ .Input.items }}", max_parallel: 4, run: hold }
  - { id: x, run: bad }
`))
	e.Wait(t, id, 20*time.Second, store.StateBlocked)
	_, err := e.Client.Rerun(t.Context(), id, "m")
	if !errors.Is(err, producer.ErrNotFinished) || !strings.Contains(err.Error(), "still runs m") {
		t.Fatalf("rerun while m runs: %v, want ErrNotFinished naming m", err)
	}
	close(release)
	poll.Until(t, 20*time.Second, func() (bool, string) {
		w, err := e.Store.Get(t.Context(), id)
		return err == nil && w.Steps[0].State == store.StepDone, "m did not finish"
	})
	if _, err := e.Client.Rerun(t.Context(), id, "m"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.Rerun(t.Context(), id, "x"); err == nil {
		t.Fatal("a second rerun while the first one's map runs was accepted")
	}
	poll.Until(t, 20*time.Second, func() (bool, string) {
		w, err := e.Store.Get(t.Context(), id)
		return err == nil && w.Steps[0].State == store.StepDone, "m of the new run did not finish"
	})
	ranTwice(t, &mu, ran, 40)
	if _, err := e.Client.Rerun(t.Context(), id, "x"); err != nil {
		t.Fatal(err)
	}
	e.Wait(t, id, 20*time.Second, store.StateCompleted)
}

// A step of a canceled workflow that outlives the cancel (its code ignores
// its context) and answers after the workflow was rerun: its outcome and
// its durable calls belong to the earlier run and are refused; the rerun's
// own answer stands.
func TestAnEarlierRunsLateOutcomeIsRefused(t *testing.T) {
	release, started := make(chan struct{}), make(chan struct{}, 4)
	var calls atomic.Int32
	firstDone := make(chan struct{})
	var invocations atomic.Int32
	var slowTask atomic.Value // the first run's task id, once submitted
	slowTask.Store("")
	e := testenv.Start(t, testenv.Options{NoWorker: true, // the task id is known before the step runs
		Middleware: func(next asynq.Handler) asynq.Handler {
			return asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
				tid, _ := asynq.GetTaskID(ctx)
				first := tid == slowTask.Load() && invocations.Add(1) == 1
				err := next.ProcessTask(ctx, task)
				if first {
					close(firstDone)
				}
				return err
			})
		},
		Steps: map[string]engine.StepFunc{
			"slow": func(ctx context.Context, s *engine.CodeStep) (any, error) {
				n := calls.Add(1)
				started <- struct{}{}
				if n == 1 {
					<-release // ignores its context: outlives the cancel and the rerun
					return engine.Do(context.WithoutCancel(ctx), s, "late", func(context.Context) (string, error) { return "old", nil })
				}
				return engine.Do(ctx, s, "late", func(context.Context) (string, error) { return "new", nil })
			}}})
	id := e.Submit(t, e.Spec("name: late\nsteps:\n  - { id: slow, run: slow }\n"))
	slowTask.Store(tasks.TaskID(id, "slow"))
	e.StartWorker(t)
	<-started
	if _, err := e.Client.Cancel(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	e.Wait(t, id, 10*time.Second, store.StateCanceled)
	if _, err := e.Client.Rerun(t.Context(), id, "slow"); err != nil {
		t.Fatal(err)
	}
	e.Wait(t, id, 20*time.Second, store.StateCompleted)
	close(release)
	<-firstDone
	w, err := e.Store.Get(t.Context(), id)
	if err != nil || w.Steps[0].Output != `"new"` || w.Generation != 1 {
		t.Fatalf("after the earlier run's late answer: %+v %v, want the rerun's \"new\"", w.Steps[0], err)
	}
	stored, err := e.Store.Calls(t.Context(), id, "slow")
	if err != nil || len(stored) != 1 || stored[0].Value != `"new"` {
		t.Fatalf("durable calls after the late answer: %+v %v", stored, err)
	}
}

// A blocked workflow whose map has a dead-lettered instance (the map stays
// mapped, every instance stopped) is rerun from the map (it was refused as
// still running the map), and every item runs again.
func TestRerunOfAMapWithADeadInstance(t *testing.T) {
	var mu sync.Mutex
	ran := map[int]int{}
	e := testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{
		"item": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			mu.Lock()
			ran[s.Index()]++
			first := ran[s.Index()] == 1
			mu.Unlock()
			if first && s.Index() == 1 {
				return nil, engine.ToDeadLetter(errors.New("bad item"))
			}
			return s.Index(), nil
		}}})
	id := e.Submit(t, e.Spec(`name: deadmap
input: { items: [1, 2, 3] }
steps:
  - { id: m, for_each: "{{ .Input.items }}", run: item }
`))
	wf := e.Wait(t, id, 20*time.Second, store.StateBlocked)
	if wf.Steps[0].State != store.StepMapped {
		t.Fatalf("map %s, want mapped with a dead instance", wf.Steps[0].State)
	}
	letters := func() []string {
		t.Helper()
		dls, err := e.Client.DeadLetters(t.Context(), "")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range dls {
			if d.Workflow == id {
				out = append(out, d.Step)
			}
		}
		return out
	}
	poll.Until(t, 5*time.Second, func() (bool, string) {
		got := letters()
		return len(got) == 1 && got[0] == "m[1]", fmt.Sprintf("dead letters %v, want the instance m[1]'s", got)
	})
	if _, err := e.Client.Rerun(t.Context(), id, "m"); err != nil {
		t.Fatal(err)
	}
	e.Wait(t, id, 20*time.Second, store.StateCompleted)
	ranTwice(t, &mu, ran, 3)
	// the instance's dead letter belonged to the run that ended: it went
	// with it, as a step's does
	if got := letters(); len(got) != 0 {
		t.Fatalf("dead letters after the rerun: %v, want none", got)
	}
}

// A workflow blocked by a map's dead instance, rerun from another step:
// the map's dead instance still blocks it (the rerun counted only the
// steps' own failures, so it came back running and waited for ever).
func TestARerunBesideAMapsDeadInstanceStaysBlocked(t *testing.T) {
	var mu sync.Mutex
	xRuns := 0
	e := testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{
		"item": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			if s.Index() == 1 {
				return nil, engine.ToDeadLetter(errors.New("bad item"))
			}
			return s.Index(), nil
		},
		"x": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			mu.Lock()
			xRuns++
			mu.Unlock()
			return "x", nil
		}}})
	id := e.Submit(t, e.Spec(`name: beside
input: { items: [1, 2, 3] }
steps:
  - { id: m, for_each: "{{ .Input.items }}", run: item }
  - { id: x, run: x }
`))
	e.Wait(t, id, 20*time.Second, store.StateBlocked)
	poll.Until(t, 5*time.Second, func() (bool, string) {
		wf, err := e.Client.Status(t.Context(), id)
		return err == nil && wf.Steps[1].State == store.StepDone, fmt.Sprintf("x not done: %v", err)
	})
	// blocked as soon as instance 1 is dead: the other instances may still
	// be settling, and a rerun waits for them (ErrNotFinished naming m)
	poll.Until(t, 10*time.Second, func() (bool, string) {
		_, err := e.Client.Rerun(t.Context(), id, "x")
		if err != nil && !errors.Is(err, producer.ErrNotFinished) {
			t.Fatal(err)
		}
		return err == nil, fmt.Sprintf("rerun: %v", err)
	})
	poll.Until(t, 10*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return xRuns == 2, fmt.Sprintf("x ran %d times, want 2", xRuns)
	})
	wf := e.Wait(t, id, 10*time.Second, store.StateBlocked)
	if wf.Steps[1].State != store.StepDone || wf.Counts != nil && wf.Counts.Dead != 1 {
		t.Fatalf("after the rerun of x: %s, x %s, counts %+v; want blocked by m's dead instance", wf.State, wf.Steps[1].State, wf.Counts)
	}
}

// A canceled workflow rerun from one branch: the steps the cancel stopped
// on the other branch run again too (they were left canceled, and the
// fan-in waiting for them kept the workflow running for ever).
func TestRerunOfACanceledWorkflowRunsWhatTheCancelStopped(t *testing.T) {
	stopped := make(chan struct{}) // the cancel reached a's first run
	var runs sync.Map
	count := func(id string) int { v, _ := runs.Load(id); n, _ := v.(int); return n }
	e := testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{
		"step": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			n := count(s.ID()) + 1
			runs.Store(s.ID(), n)
			if s.ID() == "a" && n == 1 {
				// the first run of a is in flight at the cancel and ends
				// only when the cancel reaches it (a step that finished
				// after the cancel would be kept, and not run again)
				<-ctx.Done()
				close(stopped)
				return nil, ctx.Err()
			}
			return s.ID(), nil
		}}})
	id := e.Submit(t, e.Spec(`name: branches
steps:
  - { id: a, run: step }
  - { id: b, run: step }
  - { id: c, run: step, depends_on: [a, b] }
`))
	poll.Until(t, 20*time.Second, func() (bool, string) { return count("a") == 1 && count("b") == 1, "a and b did not start" })
	if _, err := e.Client.Cancel(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	e.Wait(t, id, 20*time.Second, store.StateCanceled)
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("the cancel did not reach a's first run")
	}
	if _, err := e.Client.Rerun(t.Context(), id, "b"); err != nil {
		t.Fatal(err)
	}
	wf := e.Wait(t, id, 20*time.Second, store.StateCompleted)
	if count("a") != 2 || count("c") != 1 || wf.Steps[2].State != store.StepDone {
		t.Fatalf("runs a %d, c %d, steps %+v: want a run again and c once", count("a"), count("c"), wf.Steps)
	}
}
