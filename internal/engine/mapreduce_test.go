package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/retry"
)

// A reduce over a map wider than one page of outputs (500) reads every
// output once, in item order, across the pages' boundaries: the code
// step's iterator and the prompt's .Outputs alike.
func TestReduceReadsAWideMapAcrossPages(t *testing.T) {
	t.Parallel() // its own database, worker and provider: it runs beside the others

	const n = 1001 // three pages: 500, 500, 1
	ms := newMapSteps()
	e := testenv.Start(t, testenv.Options{Steps: ms.funcs()})
	id := e.Submit(t, e.Spec(mapSpec(n, fmt.Sprintf("    max_items: %d", n))))
	wf := e.Wait(t, id, 120*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
	if wf.State != store.StateCompleted {
		t.Fatalf("workflow %s: %+v", wf.State, wf.Steps)
	}
	got := <-ms.seen
	if len(got) != n {
		t.Fatalf("the reduce read %d outputs, want %d", len(got), n)
	}
	for i, v := range got {
		if v != 2*(100+i) {
			t.Fatalf("output %d is %d, want %d (item order across pages)", i, v, 2*(100+i))
		}
	}
	if r := ms.reduces.Load(); r != 1 {
		t.Errorf("the reduce ran %d times, want once", r)
	}
	res, err := e.Client.Result(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var prompt strings.Builder
	fmt.Fprintf(&prompt, "%d outputs, missing []: ", n)
	for i := range n {
		fmt.Fprintf(&prompt, "%d,", 2*(100+i))
	}
	prompt.WriteString("\n") // chaosllm hashes each message with a newline after it
	// chaosllm's answer names a hash of the whole prompt it was sent
	if s := res.Workflow.Steps[3].Output; s != chaosllm.Reply(prompt.String()) {
		t.Errorf("the summary prompt was not every output in item order: answered %q", s)
	}
}

// A prompt whose map outputs are over what a template may read (32 MiB)
// is dead-lettered with the reason, and no provider is called for it.
func TestAPromptOverTheMapViewLimitIsDeadLettered(t *testing.T) {
	t.Parallel() // its own database, worker and provider: it runs beside the others

	const width, size = 34, 1_000_000 // 34 outputs of ~1 MB each: over 32 MiB, each under max_output_bytes
	e := testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{
		"big": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			return strings.Repeat("x", size), nil
		}}})
	id := e.Submit(t, e.Spec(fmt.Sprintf(`name: big
input: { items: [%s] }
steps:
  - { id: m, for_each: "{{ .Input.items }}", run: big }
  - { id: sum, depends_on: [m], route: solo, prompt: "{{ len .Steps.m.Outputs }} outputs" }
`, strings.TrimSuffix(strings.Repeat("1, ", width), ", "))))
	wf := e.Wait(t, id, 60*time.Second, store.StateBlocked, store.StateCompleted, store.StateFailed)
	sum := wf.Steps[1]
	if wf.State != store.StateBlocked || sum.State != store.StepDead || !strings.Contains(sum.Error, "over 32 MiB") || !strings.Contains(sum.Error, "code step") {
		t.Fatalf("workflow %s, sum %s: %q; want it dead-lettered saying the outputs are over 32 MiB", wf.State, sum.State, sum.Error)
	}
	if c := e.Calls.Count("oa/m-solo", ""); c != 0 {
		t.Errorf("%d calls for a prompt that could not be rendered", c)
	}
}

// failOutputsRead fails the first read of a map's outputs, as a Redis that
// stops answering for a moment does.
type failOutputsRead struct{ done atomic.Bool }

func (*failOutputsRead) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f *failOutputsRead) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "hmget" && slices.Contains(cmd.Args(), any("m[0].output")) && f.done.CompareAndSwap(false, true) {
			err := errors.New("i/o timeout (injected)")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}
func (*failOutputsRead) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A read of the outputs that fails (Redis, not the outputs) is retried,
// not dead-lettered: the reduce then runs with every output.
func TestAFailedReadOfMapOutputsIsRetried(t *testing.T) {
	ms := newMapSteps()
	e := testenv.Start(t, testenv.Options{NoWorker: true, Steps: ms.funcs()})
	hook := &failOutputsRead{}
	e.Redis.AddHook(hook)
	id := e.Submit(t, e.Spec(`name: retried-read
input: { items: [100, 101, 102] }
steps:
  - { id: m, for_each: "{{ .Input.items }}", run: double, with: { item: "{{ .Item }}", index: "{{ .Index }}" } }
  - { id: summary, depends_on: [m], route: solo, prompt: "{{ len .Steps.m.Outputs }} outputs" }
`))
	e.StartWorker(t)
	wf := e.Wait(t, id, 60*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
	if !hook.done.Load() {
		t.Fatal("no read of the map's outputs failed: the test proves nothing")
	}
	if wf.State != store.StateCompleted {
		t.Fatalf("workflow %s after a failed read of the outputs: %+v", wf.State, wf.Steps)
	}
	var summary store.StepRecord
	for _, s := range wf.Steps {
		if s.ID == "summary" {
			summary = s
		}
	}
	if summary.State != store.StepDone || summary.Attempts != 2 || summary.Output != chaosllm.Reply("3 outputs\n") {
		t.Fatalf("summary %+v: want done on its second attempt, having read the 3 outputs", summary)
	}
}

// collectOutputs is a reduce that sends the map m's outputs as text.
func collectOutputs(seen chan<- []string) engine.StepFunc {
	return func(ctx context.Context, s *engine.CodeStep) (any, error) {
		var got []string
		for v, err := range s.Outputs(ctx, "m") {
			if err != nil {
				return nil, err
			}
			got = append(got, v.Output)
		}
		seen <- got
		return len(got), nil
	}
}

// A map over a field of a prompt step's format: json answer: one prompt
// instance per element, each seeing its .Item and .Index, the reduce
// seeing their answers in item order.
func TestMapOverAFieldOfAJSONAnswer(t *testing.T) {
	seen := make(chan []string, 1)
	e := testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{"collect": collectOutputs(seen)}})
	id := e.Submit(t, e.Spec(`name: plan-json
steps:
  - id: plan
    route: solo
    prompt: "List the regions"
    output:
      format: json
      schema: { type: object, required: [regions], properties: { regions: { type: array, minItems: 4, items: { type: string } } } }
  - { id: m, depends_on: [plan], for_each: "{{ .Steps.plan.JSON.regions }}", route: solo, prompt: "region {{ .Index }}: {{ .Item }}" }
  - { id: reduce, depends_on: [m], run: collect }
`))
	wf := e.Wait(t, id, 60*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
	if wf.State != store.StateCompleted {
		t.Fatalf("workflow %s: %+v", wf.State, wf.Steps)
	}
	plan, err := e.Client.Result(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var answer struct{ Regions []string }
	if err := json.Unmarshal([]byte(plan.Workflow.Steps[0].Output), &answer); err != nil || len(answer.Regions) != 4 {
		t.Fatalf("the plan's answer %q (%v): want 4 regions", plan.Workflow.Steps[0].Output, err)
	}
	got := <-seen
	if len(got) != 4 {
		t.Fatalf("the reduce read %d outputs, want 4", len(got))
	}
	for i, r := range answer.Regions {
		if want := chaosllm.Reply(fmt.Sprintf("region %d: %s\n", i, r)); got[i] != want {
			t.Errorf("output %d is %q, want the answer to %q", i, got[i], fmt.Sprintf("region %d: %s", i, r))
		}
	}
	if m := wf.Steps[1].Map; m == nil || *m != (store.MapCounts{Items: 4, Started: 4, Settled: 4}) {
		t.Errorf("map counts %+v", m)
	}
}

// A map over a code step's returned array (its whole value, .JSON): the
// elements keep their JSON types in with: and .Item.
func TestMapOverACodeStepsArray(t *testing.T) {
	seen := make(chan []string, 1)
	e := testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{
		"plan": func(context.Context, *engine.CodeStep) (any, error) {
			return []any{3, "four", map[string]int{"five": 5}}, nil
		},
		"echo": func(_ context.Context, s *engine.CodeStep) (any, error) {
			var item any
			if err := s.Item(&item); err != nil {
				return nil, err
			}
			return map[string]any{"item": item, "with": json.RawMessage(s.RawArgs()), "index": s.Index()}, nil
		},
		"collect": collectOutputs(seen),
	}})
	id := e.Submit(t, e.Spec(`name: plan-array
steps:
  - { id: plan, run: plan }
  - { id: m, depends_on: [plan], for_each: "{{ .Steps.plan.JSON }}", run: echo, with: { v: "{{ .Item }}", i: "{{ .Index }}" } }
  - { id: reduce, depends_on: [m], run: collect }
`))
	wf := e.Wait(t, id, 60*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
	if wf.State != store.StateCompleted {
		t.Fatalf("workflow %s: %+v", wf.State, wf.Steps)
	}
	want := []string{
		`{"index":0,"item":3,"with":{"i":0,"v":3}}`,
		`{"index":1,"item":"four","with":{"i":1,"v":"four"}}`,
		`{"index":2,"item":{"five":5},"with":{"i":2,"v":{"five":5}}}`,
	}
	got := <-seen
	if !slices.Equal(got, want) {
		t.Fatalf("the reduce read\n%q\nwant\n%q", got, want)
	}
}

// A reduce prompt over a map's outputs that is larger than its target's
// max_input_bytes is not sent to that target: it fails there as
// context_length, before any call, and the route's context window
// fallback answers it. A narrow map's reduce, under the bound, goes to
// the first target.
func TestAReducePromptOverMaxInputBytesGoesToTheContextFallback(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	rt := e.Config.Routes["fallback"]
	rt.Targets = slices.Clone(rt.Targets)
	rt.Targets[0].MaxInputBytes = 400
	e.Config.Routes["fallback"] = rt
	e.StartWorker(t)
	src := func(n int) string {
		items := make([]string, n)
		for i := range items {
			items[i] = strconv.Itoa(i)
		}
		return `name: reduce-size
input: { items: [` + strings.Join(items, ", ") + `] }
steps:
  - { id: m, for_each: "{{ .Input.items }}", route: solo, prompt: "item {{ .Item }}" }
  - { id: reduce, depends_on: [m], route: fallback, prompt: "{{ range .Steps.m.Outputs }}{{ . }}; {{ end }}" }
`
	}
	for _, c := range []struct {
		n      int
		target string
	}{{2, "oa/m-small"}, {20, "an/m-long"}} { // 2 answers: ~150 bytes; 20: ~1,500
		id := e.Submit(t, e.Spec(src(c.n)))
		wf := e.Wait(t, id, 60*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
		if r := wf.Steps[1]; wf.State != store.StateCompleted || r.Target != c.target {
			t.Fatalf("%d items: workflow %s, the reduce answered by %q (%s), want %s", c.n, wf.State, r.Target, r.Error, c.target)
		}
	}
	if n := e.Calls.Count("oa/m-small", retry.OK); n != 1 {
		t.Errorf("oa/m-small answered %d calls, want the narrow reduce's one", n)
	}
	if n := e.Calls.Count("an/m-long", retry.OK); n != 1 {
		t.Errorf("an/m-long answered %d calls, want the wide reduce's one", n)
	}
}
