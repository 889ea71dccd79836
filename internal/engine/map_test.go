package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
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

func (m *mapSteps) funcs() map[string]engine.StepFunc {
	return map[string]engine.StepFunc{
		"plan": func(ctx context.Context, s *engine.CodeStep) (any, error) {
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
		"double": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			m.instances.Add(1)
			var a struct{ Item, Index int }
			if err := s.Args(&a); err != nil {
				return nil, engine.ToDeadLetter(err)
			}
			var item int
			if err := s.Item(&item); err != nil || item != a.Item || s.Index() != a.Index || a.Item != 100+a.Index {
				return nil, engine.ToDeadLetter(fmt.Errorf("item %d (%v) index %d, with: %+v", item, err, s.Index(), a))
			}
			if m.fail != nil {
				if err := m.fail(a.Item); err != nil {
					return nil, err
				}
			}
			return map[string]int{"value": 2 * a.Item}, nil
		},
		"reduce": func(ctx context.Context, s *engine.CodeStep) (any, error) {
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
			return engine.ToDeadLetter(errors.New("no data for this region"))
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
	h, err := engine.NewHandler(engine.HandlerOptions{MaxOutputBytes: e.Config.Limits.MaxOutputBytes, MaxMapItems: e.Config.Limits.MaxMapItems, Redis: e.Redis, Retention: e.Config.Retention.D(), Client: e.Asynq, Router: neverCalled{t}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Add(time.Hour)
	rec, _ := h.Reconciler(engine.ReconcilerOptions{Inspector: insp, Interval: time.Minute, Owner: "one", Now: func() time.Time { return now }})
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
	if _, err := e.Client.Instances(t.Context(), id, "plan", 0, 5); !errors.Is(err, producer.ErrNotAMap) {
		t.Fatalf("a plain step: %v", err)
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
	if got, ok := flow.Cost(wf, nil); !ok || got != want {
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
