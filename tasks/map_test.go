package tasks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/record"
	"github.com/agentq/agentq/tasks"
)

// mapSpec is plan (a code step returning n items) → m (a code step per
// item) → reduce (a code step reading the outputs a page at a time) and
// summary (a prompt over .Steps.m.Outputs and .Missing).
func mapSpec(n int, extra string) string {
	return fmt.Sprintf(`name: map
input: { n: %d }
steps:
  - { id: plan, run: plan, with: { n: "{{ .Input.n }}" } }
  - id: m
    depends_on: [plan]
    for_each: "{{ .Steps.plan.JSON.items }}"
    run: double
    with: { item: "{{ .Item }}", index: "{{ .Index }}" }
%s
  - { id: reduce, depends_on: [m], run: reduce }
  - id: summary
    depends_on: [m]
    route: solo
    prompt: "{{ len .Steps.m.Outputs }} outputs, missing {{ .Steps.m.Missing }}: {{ range .Steps.m.Outputs }}{{ with . }}{{ .value }}{{ end }},{{ end }}"
`, n, extra)
}

// mapSteps are the code steps of mapSpec; reduce sends what it read.
type mapSteps struct {
	instances atomic.Int32
	reduces   atomic.Int32
	seen      chan []int
	fail      func(item int) error // an instance's verdict, nil: answer
}

func (m *mapSteps) funcs() map[string]tasks.StepFunc {
	return map[string]tasks.StepFunc{
		"plan": func(ctx context.Context, s *tasks.CodeStep) (any, error) {
			var a struct{ N int }
			if err := s.Args(&a); err != nil {
				return nil, err
			}
			items := make([]int, a.N)
			for i := range items {
				items[i] = 100 + i
			}
			return map[string]any{"items": items}, nil
		},
		"double": func(ctx context.Context, s *tasks.CodeStep) (any, error) {
			m.instances.Add(1)
			var a struct{ Item, Index int }
			if err := s.Args(&a); err != nil {
				return nil, tasks.ToDeadLetter(err)
			}
			var item int
			if err := s.Item(&item); err != nil || item != a.Item || s.Index() != a.Index || a.Item != 100+a.Index {
				return nil, tasks.ToDeadLetter(fmt.Errorf("item %d (%v) index %d, with: %+v", item, err, s.Index(), a))
			}
			if m.fail != nil {
				if err := m.fail(a.Item); err != nil {
					return nil, err
				}
			}
			return map[string]int{"value": 2 * a.Item}, nil
		},
		"reduce": func(ctx context.Context, s *tasks.CodeStep) (any, error) {
			m.reduces.Add(1)
			var got []int
			for v, err := range s.Outputs(ctx, "m") {
				if err != nil {
					return nil, err
				}
				if v.Missing {
					got = append(got, -1)
					continue
				}
				out, _ := v.JSON.(map[string]any)
				n, _ := out["value"].(json.Number).Int64()
				got = append(got, int(n))
			}
			m.seen <- got
			return len(got), nil
		},
	}
}

func newMapSteps() *mapSteps { return &mapSteps{seen: make(chan []int, 4)} }

func TestMapRunsOneInstancePerItemAndTheReduceSeesThemInOrder(t *testing.T) {
	ms := newMapSteps()
	e := testenv.Start(t, testenv.Options{Steps: ms.funcs()})
	id := e.Submit(t, e.Spec(mapSpec(37, "")))
	wf := e.Wait(t, id, 60*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
	if wf.State != store.StateCompleted {
		t.Fatalf("workflow %s: %+v", wf.State, wf.Steps)
	}
	if n := ms.instances.Load(); n != 37 {
		t.Errorf("%d instances ran, want 37", n)
	}
	got := <-ms.seen
	if len(got) != 37 {
		t.Fatalf("the reduce saw %d outputs, want 37", len(got))
	}
	for i, v := range got {
		if v != 2*(100+i) {
			t.Fatalf("output %d is %d, want %d (item order)", i, v, 2*(100+i))
		}
	}
	m := wf.Steps[1]
	if m.State != store.StepDone || m.Map == nil || *m.Map != (store.MapCounts{Items: 37, Started: 37, Settled: 37}) {
		t.Errorf("map step %s, counts %+v", m.State, m.Map)
	}
	res, err := e.Client.Result(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Workflow.Steps[3].Output; !strings.Contains(s, "37 outputs, missing []: 200,202,204,") {
		t.Errorf("the summary prompt saw %q", s)
	}
	if n := ms.reduces.Load(); n != 1 {
		t.Errorf("the reduce ran %d times", n)
	}
}

// Every instance is delivered twice (its first delivery settles, then
// reports a lost ack, so asynq runs it again): each runs its function
// once (the checkpoint answers the second), and the reduce runs once.
func TestMapInstancesDeliveredTwiceStillReduceOnce(t *testing.T) {
	ms := newMapSteps()
	var calls sync.Map
	e := testenv.Start(t, testenv.Options{Steps: ms.funcs(), Middleware: func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			err := next.ProcessTask(ctx, t)
			var p tasks.Payload
			_ = json.Unmarshal(t.Payload(), &p)
			id, _ := asynq.GetTaskID(ctx)
			if _, seen := calls.LoadOrStore(id, true); !seen && err == nil && strings.Contains(p.Step, "[") {
				return errors.New("injected: lost the ack after settling")
			}
			return err
		})
	}})
	id := e.Submit(t, e.Spec(mapSpec(25, "    max_parallel: 4\n    max_retries: 2")))
	wf := e.Wait(t, id, 60*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
	if wf.State != store.StateCompleted {
		t.Fatalf("workflow %s: %+v", wf.State, wf.Steps)
	}
	waitQueueEmpty(t, e)
	if n := ms.instances.Load(); n != 25 {
		t.Errorf("the instances' function ran %d times, want 25 (redeliveries answered by the checkpoint)", n)
	}
	if n := ms.reduces.Load(); n != 1 {
		t.Errorf("the reduce ran %d times, want once", n)
	}
	qi, err := asynq.NewInspectorFromRedisClient(e.Redis).GetQueueInfo("default")
	if err != nil || qi.Failed != 25 {
		t.Errorf("queue %+v (%v): want 25 injected failures, one per instance", qi, err)
	}
	if got := <-ms.seen; len(got) != 25 {
		t.Errorf("the reduce saw %d outputs", len(got))
	}
}

// An optional instance that is dead-lettered does not block the map: the
// reduce runs and sees its index in .Missing (and a missing view).
func TestOptionalInstanceDeadLetteredIsMissing(t *testing.T) {
	ms := newMapSteps()
	ms.fail = func(item int) error {
		if item == 103 {
			return tasks.ToDeadLetter(errors.New("no data for this region"))
		}
		return nil
	}
	e := testenv.Start(t, testenv.Options{Steps: ms.funcs()})
	id := e.Submit(t, e.Spec(mapSpec(6, "    optional: true")))
	wf := e.Wait(t, id, 60*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
	if wf.State != store.StateCompleted {
		t.Fatalf("workflow %s: %+v", wf.State, wf.Steps)
	}
	got := <-ms.seen
	if fmt.Sprint(got) != "[200 202 204 -1 208 210]" {
		t.Errorf("the reduce saw %v, want instance 3 missing", got)
	}
	if c := wf.Steps[1].Map; c == nil || c.Missing != 1 || c.Settled != 6 {
		t.Errorf("map counts %+v", c)
	}
	res, err := e.Client.Result(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Workflow.Steps[3].Output; !strings.Contains(s, "6 outputs, missing [3]:") {
		t.Errorf("the summary prompt saw %q", s)
	}
	page, err := e.Store.Instances(t.Context(), id, "m", 3, 1)
	if err != nil || page[0].State != store.StepDead || !strings.Contains(page[0].Error, "no data for this region") {
		t.Errorf("instance 3: %+v %v", page, err)
	}
}

// An array over max_items dead-letters the map step with the reason, and
// not one instance is recorded or enqueued.
func TestMapOverMaxItemsDeadLettersBeforeAnyInstance(t *testing.T) {
	ms := newMapSteps()
	e := testenv.Start(t, testenv.Options{Steps: ms.funcs()})
	id := e.Submit(t, e.Spec(mapSpec(6, "    max_items: 5")))
	wf := e.Wait(t, id, 30*time.Second, store.StateBlocked, store.StateCompleted)
	m := wf.Steps[1]
	if wf.State != store.StateBlocked || m.State != store.StepDead || !strings.Contains(m.Error, "6 items, over the step's max_items of 5") {
		t.Fatalf("workflow %s, map step %s: %q", wf.State, m.State, m.Error)
	}
	if n := ms.instances.Load(); n != 0 {
		t.Errorf("%d instances ran", n)
	}
	keys, _ := e.Redis.HKeys(t.Context(), store.Prefix+"{wf:"+id+"}:wf").Result()
	for _, k := range keys {
		if strings.HasPrefix(k, "m[") || k == "m.nitems" {
			t.Errorf("field %s written for a map that was refused", k)
		}
	}
	insp := asynq.NewInspectorFromRedisClient(e.Redis)
	for i := range 6 {
		if _, err := insp.GetTaskInfo("default", tasks.TaskID(id, fmt.Sprintf("m[%d]", i))); !errors.Is(err, asynq.ErrTaskNotFound) {
			t.Errorf("instance %d has a task: %v", i, err)
		}
	}
}

// A worker holds a map to its own limits.max_map_items, whatever cap the
// producer that submitted the spec had: over it, the map step is
// dead-lettered with the reason before any instance.
func TestMapOverTheWorkersCapDeadLetters(t *testing.T) {
	ms := newMapSteps()
	e := testenv.Start(t, testenv.Options{NoWorker: true, Steps: ms.funcs()})
	id := e.Submit(t, e.Spec(mapSpec(6, "    max_items: 8"))) // the producer's cap: 10,000
	e.Config.Limits.MaxMapItems = 5
	e.StartWorker(t)
	wf := e.Wait(t, id, 30*time.Second, store.StateBlocked, store.StateCompleted)
	m := wf.Steps[1]
	if wf.State != store.StateBlocked || m.State != store.StepDead || !strings.Contains(m.Error, "6 items, over this worker's limits.max_map_items of 5") {
		t.Fatalf("workflow %s, map step %s: %q", wf.State, m.State, m.Error)
	}
	if n := ms.instances.Load(); n != 0 || m.Map != nil {
		t.Errorf("%d instances ran, counts %+v", n, m.Map)
	}
}

// An empty array completes the map at once; its dependents run.
func TestEmptyMapCompletesAtOnce(t *testing.T) {
	ms := newMapSteps()
	e := testenv.Start(t, testenv.Options{Steps: ms.funcs()})
	id := e.Submit(t, e.Spec(mapSpec(0, "")))
	wf := e.Wait(t, id, 30*time.Second, store.StateCompleted, store.StateBlocked)
	if wf.State != store.StateCompleted || ms.instances.Load() != 0 {
		t.Fatalf("workflow %s, %d instances: %+v", wf.State, ms.instances.Load(), wf.Steps)
	}
	if got := <-ms.seen; len(got) != 0 {
		t.Errorf("reduce saw %v", got)
	}
}

// max_parallel bounds a map's instances in flight: chaosllm's peak of
// requests in flight never passes it, however many the worker could run.
func TestMaxParallelIsNeverExceeded(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Latency: chaosllm.Latency{Min: chaosllm.Duration(40 * time.Millisecond), Max: chaosllm.Duration(40 * time.Millisecond)}}}}})
	id := e.Submit(t, e.Spec(`name: wide
input: { regions: [`+strings.TrimSuffix(strings.Repeat(`"r", `, 40), ", ")+`] }
steps:
  - id: m
    for_each: "{{ .Input.regions }}"
    max_parallel: 5
    route: solo
    prompt: "region {{ .Index }}: {{ .Item }}"
`))
	wf := e.Wait(t, id, 60*time.Second, store.StateCompleted, store.StateBlocked)
	if wf.State != store.StateCompleted {
		t.Fatalf("workflow %s: %+v", wf.State, wf.Steps)
	}
	st := e.Chaos.Snapshot()
	if n := st.Count("openai", "", "ok"); n != 40 {
		t.Errorf("%d calls answered, want 40", n)
	}
	if u := wf.Steps[0].Usage; u.PromptTokens < 40 || u.CompletionTokens < 40 {
		t.Errorf("the map's usage %+v: its instances' tokens are not counted", u)
	}
	if peak := st.PeakInFlight["openai"]; peak > 5 || peak < 2 {
		t.Errorf("peak in flight %d, want at most max_parallel (5), and more than one", peak)
	}
	if e.Config.Worker.Concurrency <= 5 {
		t.Fatalf("the worker runs %d at once: the test proves nothing", e.Config.Worker.Concurrency)
	}
}

// Canceling in the middle of a map deletes the instances waiting in the
// queue (each one's task is gone, not run as a no-op and kept as
// completed) and starts no other one.
func TestCancelMidMapDeletesPendingInstances(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	started := map[int]bool{}
	e := testenv.Start(t, testenv.Options{NoWorker: true, Steps: map[string]tasks.StepFunc{
		"hold": func(ctx context.Context, s *tasks.CodeStep) (any, error) {
			mu.Lock()
			started[s.Index()] = true
			mu.Unlock()
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil, ctx.Err()
		}}})
	nStarted := func() int { mu.Lock(); defer mu.Unlock(); return len(started) }
	id := e.Submit(t, e.Spec(`name: cancel
input: { items: [`+strings.TrimSuffix(strings.Repeat(`1, `, 50), ", ")+`] }
steps:
  - { id: m, for_each: "{{ .Input.items }}", max_parallel: 30, run: hold }
`))
	e.Config.Worker.Concurrency = 4 // most of the window waits in the queue
	e.StartWorker(t)
	insp := asynq.NewInspectorFromRedisClient(e.Redis)
	poll.Until(t, 20*time.Second, func() (bool, string) {
		n := nStarted()
		return n >= 4, fmt.Sprintf("%d instances started", n)
	})
	if _, err := e.Client.Cancel(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	// before the held instances may return: every released instance that
	// did not start has no task left in asynq
	w, err := e.Store.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	m := w.Steps[0].Map
	if m == nil || m.Started != 30 {
		t.Fatalf("map counts at the cancel %+v, want the window of 30 released", m)
	}
	mu.Lock()
	ran := maps.Clone(started)
	mu.Unlock()
	if len(ran) != 4 {
		t.Fatalf("%d instances started by the cancel, want the worker's 4", len(ran))
	}
	for n := range m.Started {
		if ran[n] {
			continue
		}
		if info, err := insp.GetTaskInfo("default", tasks.TaskID(id, fmt.Sprintf("m[%d]", n))); err == nil {
			t.Errorf("instance %d never started, but its task is still there after the cancel, %s", n, info.State)
		} else if !errors.Is(err, asynq.ErrTaskNotFound) {
			t.Errorf("instance %d: %v", n, err)
		}
	}
	close(release)
	wf := e.Wait(t, id, 10*time.Second, store.StateCanceled)
	if wf.State != store.StateCanceled {
		t.Fatalf("state %s", wf.State)
	}
	pending, err := insp.ListPendingTasks("default", asynq.PageSize(100))
	if err != nil && !errors.Is(err, asynq.ErrQueueNotFound) {
		t.Fatal(err)
	}
	if len(pending) != 0 {
		t.Errorf("%d tasks still pending after the cancel", len(pending))
	}
	if n := nStarted(); n != 4 {
		t.Errorf("%d instances started: only the 4 running at the cancel should have", n)
	}
	if w, _ := e.Store.Get(t.Context(), id); w.Steps[0].Map.Started != 30 {
		t.Errorf("map counts after cancel %+v: the cancel released more", w.Steps[0].Map)
	}
}

// A map whose expansion was recorded but whose instances never reached
// asynq (its worker died in between, and the map task was lost too) is
// found by the reconciler: it enqueues the released instances again, and
// the map finishes.
func TestReconcilerEnqueuesLostMapInstances(t *testing.T) {
	ms := newMapSteps()
	e := testenv.Start(t, testenv.Options{NoWorker: true, Steps: ms.funcs()})
	id := e.Submit(t, e.Spec(`name: lost
steps:
  - { id: m, for_each: "{{ .Input.items }}", run: double, with: { item: "{{ .Item }}", index: "{{ .Index }}" } }
input: { items: [100, 101, 102] }
`))
	ctx := t.Context()
	insp := asynq.NewInspectorFromRedisClient(e.Redis)
	if err := insp.DeleteTask("default", tasks.TaskID(id, "m")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.Expand(ctx, id, "m", []string{"100", "101", "102"}, 2); err != nil {
		t.Fatal(err)
	}
	h, err := tasks.NewHandler(tasks.HandlerOptions{Redis: e.Redis, Retention: e.Config.Retention.D(), Client: e.Asynq, Router: neverCalled{t}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Add(time.Hour)
	rec, _ := h.Reconciler(tasks.ReconcilerOptions{Inspector: insp, Interval: time.Minute, Owner: "one", Now: func() time.Time { return now }})
	c, err := rec.Pass(ctx)
	if err != nil || c.Requeued != 2 || c.Settled != 0 {
		t.Fatalf("pass: %+v %v; want the two released instances enqueued again", c, err)
	}
	e.StartWorker(t)
	wf := e.Wait(t, id, 30*time.Second, store.StateCompleted, store.StateBlocked)
	if wf.State != store.StateCompleted || ms.instances.Load() != 3 {
		t.Fatalf("workflow %s after %d instances: %+v", wf.State, ms.instances.Load(), wf.Steps)
	}
}

// A worker SIGKILLed in the middle of a 200-item map: after a restart the
// map finishes (asynq recovers the instances the dead worker held) and
// the reduce runs once.
func TestSIGKILLMidMapFinishesAfterRestartWithOneReduce(t *testing.T) {
	if testing.Short() {
		t.Skip("waits about a minute for asynq to recover the crashed worker's tasks")
	}
	t.Parallel() // the minute's wait overlaps the other crash drills'
	e := testenv.Start(t, testenv.Options{NoWorker: true, Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Latency: chaosllm.Latency{Min: chaosllm.Duration(20 * time.Millisecond), Max: chaosllm.Duration(20 * time.Millisecond)}}}}})
	items := make([]string, 200)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	id := e.Submit(t, e.Spec(`name: crash-map
input: { items: [`+strings.Join(items, ", ")+`] }
steps:
  - { id: m, for_each: "{{ .Input.items }}", max_parallel: 20, route: solo, prompt: "item {{ .Item }}" }
  - { id: reduce, depends_on: [m], route: main, prompt: "reduce {{ len .Steps.m.Outputs }} outputs" }
`))
	p := startWorkerProcess(t, e, 8)
	poll.Until(t, 60*time.Second, func() (bool, string) {
		w, err := e.Store.Get(t.Context(), id)
		if err != nil || w.Steps[0].Map == nil {
			return false, fmt.Sprintf("not expanded yet (%v)", err)
		}
		return w.Steps[0].Map.Settled >= 60, fmt.Sprintf("%d instances settled", w.Steps[0].Map.Settled)
	})
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	w, _ := e.Store.Get(t.Context(), id)
	if c := w.Steps[0].Map; c.Settled >= 200 {
		t.Fatalf("the map finished before the kill (%+v): the test proves nothing", c)
	}
	e.StartWorker(t)
	wf := e.Wait(t, id, 150*time.Second, store.StateCompleted, store.StateBlocked)
	if wf.State != store.StateCompleted {
		t.Fatalf("workflow %s: %+v", wf.State, wf.Steps)
	}
	if c := wf.Steps[0].Map; *c != (store.MapCounts{Items: 200, Started: 200, Settled: 200}) {
		t.Errorf("map counts %+v", c)
	}
	if r := wf.Steps[1]; r.Attempts != 1 || !strings.Contains(r.Output, "reduce 200 outputs") {
		t.Errorf("reduce: %d attempts, output %q", r.Attempts, r.Output)
	}
	// the reduce (route main, its own model) can only have run after the
	// kill, on this process's worker, whose calls are counted: once
	if n := e.Calls.Count("oa/m-oa", "") + e.Calls.Count("an/m-an", ""); n != 1 {
		t.Errorf("the reduce called a provider %d times, want once", n)
	}
	for from := 0; from < 200; from += 100 {
		page, err := e.Store.Instances(t.Context(), id, "m", from, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range page {
			if in.State != store.StepDone || in.Output == "" {
				t.Fatalf("instance %s: %s %q", in.ID, in.State, in.Output)
			}
		}
	}
}

// The client pages through a map's instances, clamped to what was
// released, and refuses a step that is not a map.
func TestClientPagesThroughInstances(t *testing.T) {
	ms := newMapSteps()
	e := testenv.Start(t, testenv.Options{Steps: ms.funcs()})
	id := e.Submit(t, e.Spec(mapSpec(12, "")))
	e.Wait(t, id, 30*time.Second, store.StateCompleted)
	page, err := e.Client.Instances(t.Context(), id, "m", 10, 5)
	if err != nil || len(page.Instances) != 2 || page.Instances[0].ID != "m[10]" || page.Counts.Items != 12 || page.Instances[1].State != store.StepDone {
		t.Fatalf("page %+v %v", page, err)
	}
	if _, err := e.Client.Instances(t.Context(), id, "plan", 0, 5); !errors.Is(err, tasks.ErrNotAMap) {
		t.Fatalf("a plain step: %v", err)
	}
}

// largeCommands is a go-redis hook that counts the commands sent with more
// than 100 arguments.
// commandSizes counts the commands a client sends: those of more than
// 100 arguments (a read of every step) and the others.
type commandSizes struct{ large, small atomic.Int64 }

func (f *commandSizes) count(cmd redis.Cmder) {
	if len(cmd.Args()) > 100 {
		f.large.Add(1)
	} else {
		f.small.Add(1)
	}
}
func (f *commandSizes) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f *commandSizes) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		f.count(cmd)
		return next(ctx, cmd)
	}
}
func (f *commandSizes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			f.count(c)
		}
		return next(ctx, cmds)
	}
}

// waitCounting waits on workflow id through a client of its own every
// 20ms and fails the test unless each poll cost a fixed number of small
// commands (at most 3) and, over the whole wait, at most one command read
// every step (the final read of a wide workflow). It returns the
// reports.
func waitCounting(t *testing.T, e *testenv.Env, id string, wantLarge int64) (*tasks.Workflow, []tasks.Workflow) {
	t.Helper()
	rdb := redis.NewClient(e.DB.Options())
	t.Cleanup(func() { rdb.Close() })
	cs := &commandSizes{}
	rdb.AddHook(cs)
	c := tasks.NewClient(rdb, tasks.ClientOptions{Retention: e.Config.Retention.D(), Routes: e.Config.RouteNames(), SkipWorkerCheck: true})
	var reports []tasks.Workflow
	const every = 20 * time.Millisecond
	start := time.Now()
	wf, err := c.Wait(t.Context(), id, every, func(w *tasks.Workflow) { reports = append(reports, *w) })
	polls := int64(time.Since(start)/every) + 2 // at most: one at the start, one per tick, the last
	if err != nil || wf.State != store.StateCompleted {
		t.Fatalf("wait: %v %+v", err, wf)
	}
	if n := cs.large.Load(); n != wantLarge {
		t.Errorf("%d reads of over 100 fields while waiting, want %d", n, wantLarge)
	}
	t.Logf("%d small commands, %d large, for at most %d polls", cs.small.Load(), cs.large.Load(), polls)
	if n := cs.small.Load(); n > 3*polls {
		t.Errorf("%d commands for at most %d polls: a poll's cost grows with the workflow", n, polls)
	}
	if len(reports) < 2 {
		t.Errorf("%d progress reports", len(reports))
	}
	return wf, reports
}

// Waiting on a 400-step chord reads its counters each poll (a read of a
// fixed size), reports progress by them, and reads the steps once, at
// the end.
func TestWaitOnAWideChordPollsCounters(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true, Steps: map[string]tasks.StepFunc{
		"one": func(ctx context.Context, s *tasks.CodeStep) (any, error) { return 1, nil }}})
	var b strings.Builder
	b.WriteString("name: wide\nsteps:\n")
	var ids []string
	for i := range 400 {
		fmt.Fprintf(&b, "  - { id: s%d, run: one }\n", i)
		ids = append(ids, fmt.Sprintf("s%d", i))
	}
	fmt.Fprintf(&b, "  - { id: body, run: one, depends_on: [%s] }\n", strings.Join(ids, ", "))
	c := tasks.NewClient(e.Redis, tasks.ClientOptions{Retention: e.Config.Retention.D(), Routes: e.Config.RouteNames(), SkipWorkerCheck: true,
		Limits: tasks.Limits{MaxSteps: 500}})
	spec, err := c.Parse("wide.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.Submit(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	e.StartWorker(t)
	wf, reports := waitCounting(t, e, id, 1) // the steps read once, at the end
	if len(wf.Steps) != 401 {
		t.Fatalf("the final read has %d steps, want 401", len(wf.Steps))
	}
	for _, r := range reports {
		if r.Steps != nil || r.Counts == nil {
			t.Fatalf("a wide workflow reported with its %d steps (counts %v)", len(r.Steps), r.Counts)
		}
	}
	last := reports[len(reports)-1]
	if last.State != store.StateCompleted || *last.Counts != (record.Counts{Steps: 401, Settled: 401}) {
		t.Errorf("last report %s %+v", last.State, last.Counts)
	}
}

// Waiting on a workflow with a 1,000-item map costs each poll the same
// few small commands: the map's counters, never its instances.
func TestWaitOnAWideMapReadsItsCounters(t *testing.T) {
	ms := newMapSteps()
	e := testenv.Start(t, testenv.Options{NoWorker: true, Steps: ms.funcs()})
	id := e.Submit(t, e.Spec(mapSpec(1000, "")))
	e.StartWorker(t)
	wf, reports := waitCounting(t, e, id, 0)
	if m := wf.Steps[1].Map; m == nil || m.Settled != 1000 {
		t.Fatalf("map counts %+v", m)
	}
	var settled []int
	for _, r := range reports {
		if len(r.Steps) > 1 && r.Steps[1].Map != nil {
			settled = append(settled, r.Steps[1].Map.Settled)
		}
	}
	if len(settled) < 2 || !slices.IsSorted(settled) || settled[len(settled)-1] != 1000 {
		t.Errorf("the map's progress as reported: %v", settled)
	}
}

// With prices configured, each step's answer is priced when it is
// recorded, a map's cost sums its instances' (their targets are not in
// the map's record), the workflow's cost adds them up, and the cost
// metric counts it by provider and model.
func TestCostsArePricedAtRecordAndSummedIntoMaps(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true, Metrics: true})
	e.Config.Prices = map[string]config.Price{"oa/m-solo": {Prompt: 1_000_000, Completion: 2_000_000}} // 1 and 2 a token
	e.StartWorker(t)
	id := e.Submit(t, e.Spec(`name: priced
input: { items: [a, b, c] }
steps:
  - { id: m, for_each: "{{ .Input.items }}", route: solo, prompt: "item {{ .Item }}" }
  - { id: one, route: solo, prompt: "just one" }
`))
	wf := e.Wait(t, id, 20*time.Second, store.StateCompleted)
	var want float64
	for _, s := range wf.Steps {
		u := s.Usage
		if u.PromptTokens == 0 || s.CostUSD != float64(u.PromptTokens+2*u.CompletionTokens) {
			t.Errorf("step %s: usage %+v, cost %v", s.ID, u, s.CostUSD)
		}
		want += s.CostUSD
	}
	if got, ok := tasks.Cost(wf, nil); !ok || got != want {
		t.Errorf("workflow cost %v %v, want %v", got, ok, want)
	}
	resp, err := http.Get(e.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `agentq_llm_cost_total{model="m-solo",provider="oa"} `+strconv.FormatFloat(want, 'g', -1, 64)) {
		t.Errorf("the cost metric does not say %v:\n%s", want, grepLines(string(body), "agentq_llm_cost_total"))
	}
}

// An optional map dead-lettered before it expanded (over max_items) leaves
// its dependents an empty map: the prompt sees no outputs, the code step's
// iterator yields none.
func TestOptionalMapThatNeverExpandedHasNoOutputs(t *testing.T) {
	ms := newMapSteps()
	e := testenv.Start(t, testenv.Options{Steps: ms.funcs()})
	id := e.Submit(t, e.Spec(mapSpec(6, "    max_items: 5\n    optional: true")))
	wf := e.Wait(t, id, 30*time.Second, store.StateCompleted, store.StateBlocked)
	if wf.State != store.StateCompleted || wf.Steps[1].State != store.StepDead {
		t.Fatalf("workflow %s: %+v", wf.State, wf.Steps)
	}
	if got := <-ms.seen; len(got) != 0 {
		t.Errorf("the reduce saw %v", got)
	}
	res, err := e.Client.Result(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Workflow.Steps[3].Output; !strings.Contains(s, "0 outputs, missing []") {
		t.Errorf("the summary prompt saw %q", s)
	}
}
