package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/internal/worker"
	"github.com/agentq/agentq/tasks"
)

// subSpec is a three-step sub-pipeline: search → read → summarise.
const subSpec = `name: sub
input: { q: "" }
steps:
  - { id: search, route: solo, prompt: "search {{ .Input.q }}" }
  - { id: read, route: solo, depends_on: [search], prompt: "read {{ .Steps.search.Output }}" }
  - { id: summarise, route: solo, depends_on: [read], prompt: "summarise {{ .Steps.read.Output }}" }
`

// researchSpec plans five questions and runs sub for each.
const researchSpec = `name: research
%s
steps:
  - { id: plan, run: plan }
  - id: sub
    depends_on: [plan]
    for_each: "{{ .Steps.plan.JSON }}"
    workflow: { spec: sub, input: { q: "{{ .Item }}" } }
  - { id: report, run: report, depends_on: [sub], with: { answers: "{{ .Steps.sub.Outputs }}" } }
`

func childEnv(t *testing.T, o testenv.Options, reported chan []any) *testenv.Env {
	o.Steps = map[string]engine.StepFunc{
		"plan": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			return []string{"q0", "q1", "q2", "q3", "q4"}, nil
		},
		"report": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			var a struct{ Answers []any }
			if err := s.Args(&a); err != nil {
				return nil, err
			}
			reported <- a.Answers
			return len(a.Answers), nil
		},
	}
	e := testenv.Start(t, o)
	if _, err := e.Client.PutSpec(t.Context(), "sub", e.Spec(subSpec)); err != nil {
		t.Fatal(err)
	}
	return e
}

// childrenOf are the child workflows of parent's map step sub, by instance.
func childrenOf(t *testing.T, e *testenv.Env, parent string) []string {
	t.Helper()
	ids, err := e.Store.Children(t.Context(), parent)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// A map of five child workflows of three steps each runs fifteen child
// steps once each; each child names its parent, the parent's instances
// their children, and the parent's dependent reads the children's outputs.
func TestAMapOfChildWorkflows(t *testing.T) {
	reported := make(chan []any, 1)
	e := childEnv(t, testenv.Options{}, reported)
	id := e.Submit(t, e.Spec(fmt.Sprintf(researchSpec, "")))
	e.Wait(t, id, 60*time.Second, store.StateCompleted)
	answers := <-reported
	if len(answers) != 5 {
		t.Fatalf("report read %d answers: %v", len(answers), answers)
	}
	for i, a := range answers {
		if s, _ := a.(string); !strings.Contains(s, "summarise") {
			t.Errorf("answer %d is not its child's final output: %v", i, a)
		}
	}
	if n := e.Chaos.Snapshot().Count("openai", "", "ok"); n != 15 {
		t.Fatalf("%d LLM calls, want 15 (five children of three steps)", n)
	}
	children := childrenOf(t, e, id)
	if len(children) != 5 {
		t.Fatalf("%d children, want 5: %v", len(children), children)
	}
	for _, c := range children {
		wf, err := e.Client.Status(t.Context(), c)
		if err != nil || wf.State != store.StateCompleted || wf.Parent == nil || wf.Parent.Workflow != id || !strings.HasPrefix(wf.Parent.Step, "sub[") {
			t.Fatalf("child %s: %+v %v", c, wf, err)
		}
		for _, s := range wf.Steps {
			if s.Attempts != 1 {
				t.Errorf("child %s step %s ran %d times", c, s.ID, s.Attempts)
			}
		}
	}
}

// A child workflow step's task delivered again (a redelivery after a
// crash between starting the child and waiting) finds the child it
// started: no second child, and the step completes once.
func TestAChildStepDeliveredAgainStartsNoSecondChild(t *testing.T) {
	reported := make(chan []any, 1)
	e := childEnv(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{{Latency: chaosllm.Fixed(300 * time.Millisecond)}}}}, reported)
	id := e.Submit(t, e.Spec(fmt.Sprintf(researchSpec, "")))
	poll.Until(t, 20*time.Second, func() (bool, string) {
		n := len(childrenOf(t, e, id))
		return n == 5, fmt.Sprintf("%d children started", n)
	})
	for i := range 5 { // each instance's task again, under another id: a duplicate delivery
		payload, _ := json.Marshal(tasks.Payload{Workflow: id, Step: fmt.Sprintf("sub[%d]", i)})
		if _, err := e.Asynq.Enqueue(asynq.NewTask(tasks.TypeStep, payload, asynq.TaskID(fmt.Sprintf("dup-%s-%d", id, i)))); err != nil {
			t.Fatal(err)
		}
	}
	e.Wait(t, id, 60*time.Second, store.StateCompleted)
	fiveChildrenOnce(t, e, id)
}

// fiveChildrenOnce checks that research workflow id started five children
// (five workflows named sub in all) whose fifteen steps called once each.
func fiveChildrenOnce(t *testing.T, e *testenv.Env, id string) {
	t.Helper()
	if n := len(childrenOf(t, e, id)); n != 5 {
		t.Fatalf("%d children, want 5", n)
	}
	if n := e.Chaos.Snapshot().Count("openai", "", "ok"); n != 15 {
		t.Fatalf("%d LLM calls, want 15: each child step once", n)
	}
	page, err := e.Client.ListPage(t.Context(), producer.ListOptions{Name: "sub", Limit: 100})
	if err != nil || len(page) != 5 {
		t.Fatalf("%d workflows named sub, want 5 (%v)", len(page), err)
	}
}

// Canceling the parent cancels its five children; a parent's deadline
// ends its children timed_out (theirs is their parent's).
func TestCancelAndDeadlineReachTheChildren(t *testing.T) {
	t.Parallel()
	reported := make(chan []any, 1)
	e := childEnv(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{{Fault: &chaosllm.Fault{Kind: chaosllm.KindHang}}}}}, reported)
	id := e.Submit(t, e.Spec(fmt.Sprintf(researchSpec, "")))
	poll.Until(t, 20*time.Second, func() (bool, string) {
		n := len(childrenOf(t, e, id))
		return n == 5, fmt.Sprintf("%d children started", n)
	})
	if _, err := e.Client.Cancel(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	for _, c := range childrenOf(t, e, id) {
		e.Wait(t, c, 20*time.Second, store.StateCanceled)
	}

	late := e.Submit(t, e.Spec(fmt.Sprintf(researchSpec, "deadline: 3s")))
	e.Wait(t, late, 30*time.Second, store.StateTimedOut)
	children := childrenOf(t, e, late)
	if len(children) != 5 {
		t.Fatalf("%d children, want 5", len(children))
	}
	for _, c := range children {
		e.Wait(t, c, 30*time.Second, store.StateTimedOut)
	}
}

// A child that ends without completing (canceled here) dead-letters its
// parent step with the child's reason; a rerun of the parent from that
// step starts a new child, and the old one stays, linked.
func TestAChildsFailureIsItsStepsAndARerunStartsANewOne(t *testing.T) {
	t.Parallel()
	reported := make(chan []any, 1)
	e := childEnv(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Name: "the first call hangs", Requests: 1, Fault: &chaosllm.Fault{Kind: chaosllm.KindHang}}, {Name: "fine"}}}}, reported)
	id := e.Submit(t, e.Spec(`name: one
steps:
  - { id: sub, workflow: { spec: sub, input: { q: "only" } } }
`))
	var child string
	poll.Until(t, 20*time.Second, func() (bool, string) {
		cs := childrenOf(t, e, id)
		if len(cs) == 1 {
			child = cs[0]
		}
		return child != "", "no child started"
	})
	if wf, err := e.Client.Status(t.Context(), id); err != nil || wf.Steps[0].WaitsFor != "child" || wf.Steps[0].Child != child {
		t.Fatalf("the parent step: %+v %v", wf, err)
	}
	if _, err := e.Client.Cancel(t.Context(), child); err != nil {
		t.Fatal(err)
	}
	wf := e.Wait(t, id, 20*time.Second, store.StateBlocked)
	if s := wf.Steps[0]; s.State != store.StepDead || !strings.Contains(s.Error, "child workflow "+child+" ended canceled") {
		t.Fatalf("the parent step after its child's cancel: %s %q", s.State, s.Error)
	}
	// the child-ended task delivered again (a worker died before asynq
	// archived it): it starts nothing over
	payload, _ := json.Marshal(tasks.Payload{Workflow: id, Step: "sub"})
	dup := "dup-child-ended-" + id
	if _, err := e.Asynq.Enqueue(asynq.NewTask(tasks.TypeChildEnded, payload, asynq.TaskID(dup), asynq.Retention(time.Hour))); err != nil {
		t.Fatal(err)
	}
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: e.DB.Addr, DB: e.DB.DB})
	defer insp.Close()
	poll.Until(t, 10*time.Second, func() (bool, string) {
		info, err := insp.GetTaskInfo("default", dup)
		return err == nil && info.State == asynq.TaskStateCompleted, fmt.Sprintf("the duplicate: %+v %v", info, err)
	})
	if cs := childrenOf(t, e, id); len(cs) != 1 {
		t.Fatalf("the duplicate started a child: %v", cs)
	}
	if wf, _ := e.Store.Get(t.Context(), id); wf.Steps[0].State != store.StepDead || wf.Steps[0].Attempts != 1 {
		t.Fatalf("after the duplicate: %s, attempt %d", wf.Steps[0].State, wf.Steps[0].Attempts)
	}
	var task string
	poll.Until(t, 10*time.Second, func() (bool, string) { // archived once the child-ended task returns
		var err error
		task, err = e.Client.DeadLetterTask(t.Context(), id, "sub")
		return err == nil && strings.Contains(task, ":child-ended:"), fmt.Sprintf("dead letter task %q (%v)", task, err)
	})
	if err := e.Client.Discard(t.Context(), task); err != nil {
		t.Fatal(err)
	}
	e.Wait(t, id, 10*time.Second, store.StateFailed)
	if _, err := e.Client.Rerun(t.Context(), id, "sub"); err != nil {
		t.Fatal(err)
	}
	wf = e.Wait(t, id, 30*time.Second, store.StateCompleted)
	if wf.Steps[0].Child == child || wf.Steps[0].Child != flow.ChildID(id, "sub", 1, 1) {
		t.Fatalf("the rerun's child %s (the first %s)", wf.Steps[0].Child, child)
	}
	if old, err := e.Client.Status(t.Context(), child); err != nil || old.State != store.StateCanceled || old.Parent == nil || old.Parent.Workflow != id {
		t.Fatalf("the first child after the rerun: %+v %v", old, err)
	}
	var out string
	if err := json.Unmarshal([]byte(wf.Steps[0].Output), &out); err != nil || !strings.Contains(out, "summarise") {
		t.Fatalf("the step's output %q: want the child's final output as a JSON string", wf.Steps[0].Output)
	}
}

// A child workflow step whose stored spec does not exist is refused at
// submit, naming it.
func TestAChildOfAnUnknownSpecIsRefused(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	wspec := e.Spec("name: x\nsteps:\n  - { id: sub, workflow: { spec: nowhere } }\n")
	if _, err := e.Client.Submit(t.Context(), wspec); err == nil || !strings.Contains(err.Error(), `steps[0] (sub).workflow.spec: no stored spec "nowhere"`) {
		t.Fatalf("submit: %v", err)
	}
}

// childSteps are childEnv's code steps, for a worker process.
func childSteps() map[string]engine.StepFunc {
	return map[string]engine.StepFunc{
		"plan": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			return []string{"q0", "q1", "q2", "q3", "q4"}, nil
		},
		"report": func(ctx context.Context, s *engine.CodeStep) (any, error) { return "reported", nil },
	}
}

// A worker SIGKILLed right after a child workflow step created its child,
// before the step's task ended: the step was parked first, so the child's
// end completes it without its task (which asynq recovers later and finds
// the step done, or, if it comes first, finds the child it started); the
// map has five children, each step run once.
func TestAParentKilledAfterStartingAChildStartsNoSecond(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a worker process")
	}
	reported := make(chan []any, 1)
	e := childEnv(t, testenv.Options{NoWorker: true}, reported)
	id := e.Submit(t, e.Spec(fmt.Sprintf(researchSpec, "")))
	p := startWorkerProcess(t, e, 1, workerEnv+"_CRASH_AFTER_CHILD=1", workerEnv+"_CHILD_STEPS=1")
	<-p.done // it killed itself once a child existed
	if n := len(childrenOf(t, e, id)); n != 1 {
		t.Fatalf("%d children when the worker died, want 1", n)
	}
	e.StartWorker(t)
	e.Wait(t, id, 150*time.Second, store.StateCompleted)
	fiveChildrenOnce(t, e, id)
}

// A spec that starts itself as a child nests only so deep: the step that
// would go past the bound is dead-lettered, saying why. A put of an
// earlier version's content makes it the latest again (a rollback).
func TestASpecThatStartsItselfStopsAndARollback(t *testing.T) {
	reported := make(chan []any, 1)
	e := childEnv(t, testenv.Options{}, reported)
	loop := e.Spec("name: loop\nsteps:\n  - { id: again, workflow: { spec: loop } }\n")
	if _, err := e.Client.PutSpec(t.Context(), "loop", loop); err != nil {
		t.Fatal(err)
	}
	id := e.Submit(t, loop)
	var deepest string
	poll.Until(t, 60*time.Second, func() (bool, string) {
		wf, err := e.Store.Get(t.Context(), id)
		for err == nil && wf.Steps[0].Child != "" {
			deepest = wf.Steps[0].Child
			wf, err = e.Store.Get(t.Context(), deepest)
		}
		return err == nil && wf.State == store.StateBlocked && strings.Contains(wf.Steps[0].Error, "levels deep, over 32"),
			fmt.Sprintf("the deepest child: %+v %v", wf, err)
	})
	if _, err := e.Client.Cancel(t.Context(), id); err != nil {
		t.Fatal(err)
	}

	a, b := e.Spec(subSpec), e.Spec(strings.Replace(subSpec, "search {{", "look up {{", 1))
	v1, _ := e.Client.PutSpec(t.Context(), "rolled", a)
	v2, _ := e.Client.PutSpec(t.Context(), "rolled", b)
	back, err := e.Client.PutSpec(t.Context(), "rolled", a)
	if err != nil || back.Version != v1.Version || back.Created {
		t.Fatalf("a put of version 1's content: %+v %v", back, err)
	}
	if _, v, err := e.Client.StoredSpecOf(t.Context(), "rolled", 0); err != nil || v != v1.Version {
		t.Fatalf("the latest after the rollback is %d (%v), want %d (not %d)", v, err, v1.Version, v2.Version)
	}
	if again, _ := e.Client.PutSpec(t.Context(), "rolled", e.Spec(strings.Replace(subSpec, "read {{", "open {{", 1))); again.Version != 3 {
		t.Fatalf("a new content after the rollback: version %d, want 3", again.Version)
	}
}

// A child whose final step is a map gives its parent the list of its
// instances' outputs.
func TestAChildWithAMapFinalGivesItsList(t *testing.T) {
	reported := make(chan []any, 1)
	e := childEnv(t, testenv.Options{}, reported)
	if _, err := e.Client.PutSpec(t.Context(), "each", e.Spec("name: each\ninput: { items: [] }\nsteps:\n  - { id: m, for_each: \"{{ .Input.items }}\", route: solo, prompt: \"item {{ .Item }}\" }\n")); err != nil {
		t.Fatal(err)
	}
	id := e.Submit(t, e.Spec("name: p\nsteps:\n  - { id: sub, workflow: { spec: each, input: { items: [1, 2, 3] } } }\n"))
	wf := e.Wait(t, id, 30*time.Second, store.StateCompleted)
	var list []string
	if err := json.Unmarshal([]byte(wf.Steps[0].Output), &list); err != nil || len(list) != 3 || !strings.Contains(list[2], "item 3") {
		t.Fatalf("the step's output %q (%v): want its child's three instances' outputs", wf.Steps[0].Output, err)
	}
}

// A child step's task delivered again after a new version of its spec was
// put finds the child it started and keeps its version: nothing of the
// new version is checked against it or enqueued for it.
func TestARedeliveredChildStepKeepsItsChildsVersion(t *testing.T) {
	reported := make(chan []any, 1)
	e := childEnv(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{{Latency: chaosllm.Fixed(300 * time.Millisecond)}}}}, reported)
	id := e.Submit(t, e.Spec("name: p\nsteps:\n  - { id: sub, workflow: { spec: sub, input: { q: x } } }\n"))
	var child string
	poll.Until(t, 20*time.Second, func() (bool, string) {
		cs := childrenOf(t, e, id)
		if len(cs) == 1 {
			child = cs[0]
		}
		return child != "", "no child started"
	})
	// version 2 has other steps and a key its input cannot render
	if _, err := e.Client.PutSpec(t.Context(), "sub", e.Spec(`name: sub
concurrency: { key: "{{ .Input.tenant }}", limit: 1 }
steps:
  - { id: other, route: solo, prompt: "other" }
`)); err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(tasks.Payload{Workflow: id, Step: "sub"})
	if _, err := e.Asynq.Enqueue(asynq.NewTask(tasks.TypeStep, payload, asynq.TaskID("dup-"+id))); err != nil {
		t.Fatal(err)
	}
	wf := e.Wait(t, id, 30*time.Second, store.StateCompleted, store.StateBlocked)
	if wf.State != store.StateCompleted || wf.Steps[0].Child != child {
		t.Fatalf("after the redelivery: %s, child %s (was %s): %+v", wf.State, wf.Steps[0].Child, child, wf.Steps[0])
	}
	c, err := e.Store.Get(t.Context(), child)
	if err != nil || len(c.Steps) != 3 || c.Steps[0].ID != "search" {
		t.Fatalf("the child ran %+v (%v): want version 1's three steps", c, err)
	}
}

// A child's end whose telling was lost (its task gone: Redis refused the
// enqueue through a long outage) is told again by the reconciler: the
// waiting step keeps its workflow in view, and the step completes.
func TestTheReconcilerTellsALostChildEnd(t *testing.T) {
	reported := make(chan []any, 1)
	e := childEnv(t, testenv.Options{NoWorker: true}, reported)
	lost := make(chan string, 1)
	var once sync.Once
	drop := func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			if t.Type() == tasks.TypeChildEnded {
				dropped := false
				once.Do(func() {
					id, _ := asynq.GetTaskID(ctx)
					lost <- id
					dropped = true
				})
				if dropped {
					return nil // as if it never ran
				}
			}
			return next.ProcessTask(ctx, t)
		})
	}
	runWorker(t, e, nil, func(o *worker.Options) { fastReconciler(o); o.Middleware = drop })
	id := e.Submit(t, e.Spec("name: p\nsteps:\n  - { id: sub, workflow: { spec: sub, input: { q: x } } }\n"))
	task := <-lost
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: e.DB.Addr, DB: e.DB.DB})
	defer insp.Close()
	poll.Until(t, 10*time.Second, func() (bool, string) { // gone from asynq: the telling never happened
		err := insp.DeleteTask("default", task)
		return err == nil, fmt.Sprintf("delete %s: %v", task, err)
	})
	// the telling was dropped: only the reconciler (fast here: it may
	// have told the end again already) completes the parent
	if wf, _ := e.Store.Get(t.Context(), id); wf.State != store.StateWaiting && wf.State != store.StateCompleted {
		t.Fatalf("before the reconciler: %s", wf.State)
	}
	e.Wait(t, id, 30*time.Second, store.StateCompleted)
}
