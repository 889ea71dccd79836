package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// noPoll is a worker poll interval longer than these tests' chains take:
// asynq dequeues the tasks that are pending when the worker starts, then
// sleeps (1.5 to 4.5s; asynq's shutdown waits for that sleep to end).
const noPoll = 3 * time.Second

// codeChain is a chain of n code steps running fn.
func codeChain(name, fn string, n int, extra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nsteps:\n  - { id: s0, run: %s%s }\n", name, fn, extra)
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "  - { id: s%d, run: %s, depends_on: [s%d]%s }\n", i, fn, i-1, extra)
	}
	return b.String()
}

// A chain's steps after its first run on the worker that settled their
// predecessor, with no poll: each once, in order, on its first attempt.
func TestAChainRunsByHandOffsWithoutPolling(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var ran []string
	e := testenv.Start(t, testenv.Options{NoWorker: true, PollInterval: noPoll, Steps: map[string]engine.StepFunc{
		"f": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			mu.Lock()
			defer mu.Unlock()
			ran = append(ran, fmt.Sprintf("%s#%d", s.ID(), s.Attempt()))
			return "ok", nil
		}}})
	ids := []string{e.Submit(t, e.Spec(codeChain("c1", "f", 8, ""))), e.Submit(t, e.Spec(codeChain("c2", "f", 8, "")))}
	e.StartWorker(t)
	for _, id := range ids {
		wf := e.Wait(t, id, 30*time.Second, store.StateCompleted, store.StateFailed, store.StateBlocked)
		if wf.State != store.StateCompleted {
			t.Fatalf("workflow %s is %s", id, wf.State)
		}
		for _, s := range wf.Steps {
			if s.Attempts != 1 {
				t.Errorf("step %s ran %d times", s.ID, s.Attempts)
			}
			// The workflow ends inside the handler of the chain's first
			// task (its successors ran there by hand-off); asynq marks
			// that task completed only once the handler has returned.
			insp := asynq.NewInspectorFromRedisClient(e.Redis)
			poll.Until(t, 10*time.Second, func() (bool, string) {
				info, err := insp.GetTaskInfo("default", flow.StepTaskID(id, s.ID, 0))
				if err != nil {
					return false, fmt.Sprintf("step %s's task: %v", s.ID, err)
				}
				return info.State == asynq.TaskStateCompleted, fmt.Sprintf("step %s's task is %v (want completed, as asynq leaves it)", s.ID, info.State)
			})
		}
	}
	if len(ran) != 16 {
		t.Fatalf("ran %v, want 16 steps once each", ran)
	}
	handed := 0
	for len(e.Events) > 0 {
		if ev := <-e.Events; ev.HandedOff {
			handed++
		} else if ev.Step != "s0" && ev.Step != "" {
			t.Errorf("step %s of %s was not handed off", ev.Step, ev.Workflow)
		}
	}
	if handed != 14 {
		t.Fatalf("%d steps were handed off, want 14 (every one after a chain's first)", handed)
	}
}

// A paused queue's steps are not handed off: the successor of a step that
// ends while its queue is paused stays pending.
func TestAPausedQueueIsNotHandedOff(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	e := testenv.Start(t, testenv.Options{NoWorker: true, PollInterval: noPoll, Steps: map[string]engine.StepFunc{
		"f": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			if s.ID() == "s0" {
				started <- struct{}{}
				<-release
			}
			return "ok", nil
		}}})
	id := e.Submit(t, e.Spec(codeChain("paused", "f", 2, "")))
	e.StartWorker(t)
	<-started
	insp := asynq.NewInspectorFromRedisClient(e.Redis)
	if err := insp.PauseQueue("default"); err != nil {
		t.Fatal(err)
	}
	close(release)
	poll.Until(t, 20*time.Second, func() (bool, string) {
		info, err := insp.GetTaskInfo("default", flow.StepTaskID(id, "s0", 0))
		return err == nil && info.State == asynq.TaskStateCompleted, fmt.Sprintf("s0's task: %v, %v", info, err)
	})
	info, err := insp.GetTaskInfo("default", flow.StepTaskID(id, "s1", 0))
	if err != nil || info.State != asynq.TaskStatePending {
		t.Fatalf("s1's task after s0 ended on a paused queue: %v, %v (want pending)", info, err)
	}
}

// Canceling a workflow stops its handed-off step at once (asynq's cancel
// reaches it as it reaches a step asynq runs).
func TestCancelStopsAHandedOffStep(t *testing.T) {
	t.Parallel()
	started, stopped := make(chan struct{}, 1), make(chan error, 1)
	e := testenv.Start(t, testenv.Options{NoWorker: true, PollInterval: noPoll, Steps: map[string]engine.StepFunc{
		"f": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			if s.ID() == "s1" {
				started <- struct{}{}
				<-ctx.Done()
				stopped <- ctx.Err()
				return nil, ctx.Err()
			}
			return "ok", nil
		}}})
	id := e.Submit(t, e.Spec(codeChain("cancel", "f", 3, ", timeout: 10m")))
	e.StartWorker(t)
	<-started
	if _, err := e.Client.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-stopped:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the handed-off step's context ended with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the handed-off step was not stopped by the cancel")
	}
	if wf := e.Wait(t, id, 20*time.Second, store.StateCanceled); wf.Steps[2].Attempts != 0 {
		t.Fatalf("s2 ran after the cancel: %+v", wf.Steps[2])
	}
}

// A handed-off step that fails on its last attempt is dead-lettered and
// its task archived, as asynq ends it.
func TestAHandedOffStepThatFailsIsDeadLettered(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{NoWorker: true, PollInterval: noPoll, Steps: map[string]engine.StepFunc{
		"f": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			if s.ID() == "s1" {
				return nil, errors.New("upstream refused")
			}
			return "ok", nil
		}}})
	id := e.Submit(t, e.Spec(codeChain("fails", "f", 2, ", max_retries: 0")))
	e.StartWorker(t)
	wf := e.Wait(t, id, 30*time.Second, store.StateBlocked, store.StateFailed)
	if s := wf.Steps[1]; s.State != store.StepDead || s.Attempts != 1 || !strings.Contains(s.Error, "upstream refused") {
		t.Fatalf("s1: %+v", s)
	}
	// the step is settled dead inside its task's run; asynq archives the
	// task once the run returns
	poll.Until(t, 10*time.Second, func() (bool, string) {
		info, err := asynq.NewInspectorFromRedisClient(e.Redis).GetTaskInfo("default", flow.StepTaskID(id, "s1", 0))
		return err == nil && info.State == asynq.TaskStateArchived && strings.Contains(info.LastErr, "upstream refused"),
			fmt.Sprintf("s1's task: %+v, %v (want archived with its error)", info, err)
	})
}

// A handed-off step that fails is retried with the worker's backoff, its
// retry counted, and completes.
func TestAHandedOffStepIsRetried(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{
		"f": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			if s.ID() == "s1" && s.Attempt() == 1 {
				return nil, errors.New("upstream 503")
			}
			return "ok", nil
		}}})
	id := e.Submit(t, e.Spec(codeChain("retried", "f", 3, ", max_retries: 2")))
	wf := e.Wait(t, id, 30*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
	if wf.State != store.StateCompleted || wf.Steps[1].Attempts != 2 {
		t.Fatalf("workflow %s, s1 %+v (want completed on s1's second attempt)", wf.State, wf.Steps[1])
	}
}

// Hand-offs share the worker's slots with asynq: however many chains run,
// no more steps than worker.concurrency run at once.
func TestHandOffsKeepTheWorkersConcurrency(t *testing.T) {
	t.Parallel()
	var in, peak atomic.Int32
	e := testenv.Start(t, testenv.Options{NoWorker: true, Steps: map[string]engine.StepFunc{
		"f": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			n := in.Add(1)
			defer in.Add(-1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			return "ok", nil
		}}})
	e.Config.Worker.Concurrency = 3
	var ids []string
	for i := range 20 {
		ids = append(ids, e.Submit(t, e.Spec(codeChain(fmt.Sprintf("c%d", i), "f", 5, ""))))
	}
	e.StartWorker(t)
	for _, id := range ids {
		if wf := e.Wait(t, id, 60*time.Second, store.StateCompleted, store.StateBlocked); wf.State != store.StateCompleted {
			t.Fatalf("workflow %s is %s", id, wf.State)
		}
	}
	if p := peak.Load(); p > 3 {
		t.Fatalf("%d steps ran at once on a worker of 3 slots", p)
	}
}

// A worker SIGKILLed while a handed-off step runs: asynq's recoverer
// brings the step's task back when its lease lapses, and the step runs
// again once; the chain completes.
func TestAKilledWorkersHandedOffStepIsRecovered(t *testing.T) {
	if testing.Short() {
		t.Skip("waits about a minute for asynq to recover the killed worker's task")
	}
	t.Parallel()
	e := testenv.Start(t, testenv.Options{NoWorker: true, Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Name: "first", Requests: 1}, {Name: "the second call hangs", Requests: 1, Fault: &chaosllm.Fault{Kind: chaosllm.KindHang}}, {Name: "fine"}}}})
	id := e.Submit(t, e.Spec("name: killed\ndefaults: { route: solo, timeout: 10m }\nsteps:\n  - { id: a, prompt: one }\n  - { id: b, prompt: two, depends_on: [a] }\n  - { id: c, prompt: three, depends_on: [b] }\n"))
	p := startWorkerProcess(t, e, 4, workerEnv+"_POLL=1h")
	poll.Until(t, 20*time.Second, func() (bool, string) {
		return e.Chaos.Snapshot().Count("openai", "", "hang") > 0, "b's call did not reach chaosllm"
	})
	info, err := asynq.NewInspectorFromRedisClient(e.Redis).GetTaskInfo("default", flow.StepTaskID(id, "b", 0))
	if err != nil || info.State != asynq.TaskStateActive {
		t.Fatalf("b's task while it runs: %+v, %v (want active, under a lease)", info, err)
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	e.StartWorker(t)
	wf := e.Wait(t, id, 150*time.Second, store.StateCompleted)
	if a, b, c := wf.Steps[0].Attempts, wf.Steps[1].Attempts, wf.Steps[2].Attempts; a != 1 || b != 2 || c != 1 {
		t.Fatalf("attempts a %d, b %d, c %d (want 1, 2, 1)", a, b, c)
	}
}

// A handed-off step is held to its own timeout, as asynq holds a step it
// runs: given up on at it (its function left running), dead-lettered on
// its last attempt.
func TestAHandedOffStepIsHeldToItsTimeout(t *testing.T) {
	t.Parallel()
	hang := make(chan struct{})
	e := testenv.Start(t, testenv.Options{NoWorker: true, PollInterval: noPoll, Steps: map[string]engine.StepFunc{
		"f": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			if s.ID() == "s1" {
				<-hang // ignores its context
			}
			return "ok", nil
		}}})
	id := e.Submit(t, e.Spec(codeChain("hangs", "f", 2, ", timeout: 1s, max_retries: 0")))
	e.StartWorker(t)
	t.Cleanup(func() { close(hang) }) // before the worker stops (cleanups run last first)
	wf := e.Wait(t, id, 30*time.Second, store.StateBlocked, store.StateFailed, store.StateCompleted)
	if s := wf.Steps[1]; wf.State == store.StateCompleted || s.State != store.StepDead || !strings.Contains(s.Error, "timeout") {
		t.Fatalf("workflow %s, s1 %+v (want s1 dead of its timeout)", wf.State, s)
	}
	// the step is settled dead first, its task archived right after
	poll.Until(t, 10*time.Second, func() (bool, string) {
		info, err := asynq.NewInspectorFromRedisClient(e.Redis).GetTaskInfo("default", flow.StepTaskID(id, "s1", 0))
		return err == nil && info.State == asynq.TaskStateArchived, fmt.Sprintf("s1's task: %+v, %v (want archived)", info, err)
	})
}

// Hand-offs run in the slot of the task that handed them on: a step asynq
// delivers while they run never waits for one (it waits in its queue for
// a free slot, and its timeout starts when it runs).
func TestHandOffsDoNotMakeDeliveredStepsWait(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	holding := make(chan string, 2)
	e := testenv.Start(t, testenv.Options{NoWorker: true, PollInterval: noPoll, Steps: map[string]engine.StepFunc{
		"hold": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			holding <- s.Workflow() + "/" + s.ID()
			<-release
			return "ok", nil
		},
		"quick": func(ctx context.Context, s *engine.CodeStep) (any, error) { return "ok", nil },
	}})
	e.Config.Worker.Concurrency = 2
	chain := e.Submit(t, e.Spec("name: chain\nsteps:\n  - { id: a, run: quick }\n  - { id: b, run: hold, depends_on: [a], timeout: 1m }\n"))
	other := e.Submit(t, e.Spec("name: other\nsteps:\n  - { id: x, run: hold, timeout: 1m }\n"))
	e.StartWorker(t)
	<-holding
	<-holding // both slots held: b by a hand-off, x by asynq
	late := e.Submit(t, e.Spec("name: late\nsteps:\n  - { id: u, run: quick, timeout: 1s, max_retries: 0 }\n"))
	close(release)
	for _, id := range []string{chain, other, late} {
		wf := e.Wait(t, id, 30*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
		if wf.State != store.StateCompleted {
			t.Fatalf("workflow %s is %s: %+v", id, wf.State, wf.Steps)
		}
	}
}

// A chain under a concurrency key of limit 1 hands each step on: the step
// takes the slot its predecessor gave back, and is never throttled.
func TestAChainUnderAKeyIsHandedOffUnthrottled(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{NoWorker: true, PollInterval: noPoll, Steps: map[string]engine.StepFunc{
		"f": func(ctx context.Context, s *engine.CodeStep) (any, error) { return "ok", nil }}})
	y := strings.Replace(codeChain("keyed", "f", 6, ""), "steps:", "concurrency: { key: tenant-a, limit: 1 }\nsteps:", 1)
	id := e.Submit(t, e.Spec(y))
	e.StartWorker(t)
	if wf := e.Wait(t, id, 30*time.Second, store.StateCompleted, store.StateBlocked); wf.State != store.StateCompleted {
		t.Fatalf("workflow is %s", wf.State)
	}
	// a step's events may reach the channel just after its workflow is
	// seen completed: read until the five hand-offs, within a deadline
	handed := 0
	deadline := time.After(10 * time.Second)
	for handed < 5 {
		select {
		case ev := <-e.Events:
			if ev.State == store.StepThrottled {
				t.Errorf("step %s was throttled by its own chain", ev.Step)
			}
			if ev.HandedOff {
				handed++
			}
		case <-deadline:
			t.Fatalf("%d steps handed off, want 5", handed)
		}
	}
	for len(e.Events) > 0 {
		if ev := <-e.Events; ev.State == store.StepThrottled || ev.HandedOff {
			t.Errorf("after the five hand-offs: %+v", ev)
		}
	}
}

// A step handed on by a task that is then given up on at its timeout
// goes back to its queue and runs (it is not left active and unrun).
func TestAStepHandedOnByATaskGivenUpOnStillRuns(t *testing.T) {
	t.Parallel()
	stuck := make(chan struct{})
	e := testenv.Start(t, testenv.Options{NoWorker: true, PollInterval: noPoll,
		Steps: map[string]engine.StepFunc{"f": func(ctx context.Context, s *engine.CodeStep) (any, error) { return "ok", nil }},
		Middleware: func(next asynq.Handler) asynq.Handler {
			return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
				err := next.ProcessTask(ctx, t)
				if strings.Contains(string(t.Payload()), `"step":"s0"`) {
					<-stuck // s0 settled and handed s1 on, then its task outlives its timeout
				}
				return err
			})
		}})
	id := e.Submit(t, e.Spec(codeChain("givenup", "f", 2, ", timeout: 1s, max_retries: 1")))
	e.StartWorker(t)
	t.Cleanup(func() { close(stuck) }) // before the worker stops: a held handler holds asynq's shutdown
	wf := e.Wait(t, id, 60*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
	if wf.State != store.StateCompleted || wf.Steps[1].Attempts != 1 {
		t.Fatalf("workflow %s, s1 %+v (want completed, s1 run once)", wf.State, wf.Steps[1])
	}
}

// Canceling a workflow while a step runs as a hand-off cancels that step,
// not the task of the done step that handed it on (which asynq would
// count failed, a false dead letter).
func TestCancelDuringAHandOffLeavesThePredecessorsTaskCompleted(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	e := testenv.Start(t, testenv.Options{NoWorker: true, PollInterval: noPoll, Steps: map[string]engine.StepFunc{
		"f": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			if s.ID() == "s1" {
				started <- struct{}{}
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return "ok", nil
		}}})
	id := e.Submit(t, e.Spec(codeChain("cancel2", "f", 3, ", timeout: 10m, max_retries: 0")))
	e.StartWorker(t)
	<-started
	if _, err := e.Client.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	e.Wait(t, id, 20*time.Second, store.StateCanceled)
	insp := asynq.NewInspectorFromRedisClient(e.Redis)
	poll.Until(t, 20*time.Second, func() (bool, string) {
		info, err := insp.GetTaskInfo("default", flow.StepTaskID(id, "s0", 0))
		return err == nil && info.State == asynq.TaskStateCompleted, fmt.Sprintf("s0's task: %+v, %v (want completed)", info, err)
	})
}
