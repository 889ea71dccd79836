package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
)

func ask(prompt string) llmclient.Request {
	return llmclient.Request{Messages: []llmclient.Message{{Role: "user", Content: prompt}}}
}

// A code step makes two LLM calls; the second fails twice (500s). The step
// is retried twice and completes, and the first call reached the provider
// exactly once: retried attempts got its stored answer.
func TestCodeStepDurableCallsAreNotRepeated(t *testing.T) {
	var runs atomic.Int32
	e := testenv.Start(t, testenv.Options{
		Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
			{Requests: 1}, {Requests: 2, Fault: &chaosllm.Fault{Status: 500}}, {}}},
		Steps: map[string]engine.StepFunc{"two_calls": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			runs.Add(1)
			first, err := s.LLM().Chat(ctx, "solo", ask("first question"))
			if err != nil {
				return nil, err
			}
			second, err := s.LLM().Chat(ctx, "solo", ask("second question, after: "+first.Text))
			if err != nil {
				return nil, err
			}
			return map[string]any{"first": first.Text, "second": second.Text, "attempt": s.Attempt()}, nil
		}},
	})
	id := e.Submit(t, e.Spec("name: durable\nsteps:\n  - { id: c, run: two_calls, max_retries: 3 }\n"))
	wf := e.Wait(t, id, 30*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
	if wf.State != store.StateCompleted {
		t.Fatalf("workflow %s: %+v", wf.State, wf.Steps)
	}
	st := e.Chaos.Snapshot()
	if ok, failed := st.Count("openai", "", "ok"), st.Count("openai", "", "status_500"); ok != 2 || failed != 2 {
		t.Errorf("provider saw %d answers and %d 500s, want 2 and 2 (the first call once, the second three times)", ok, failed)
	}
	if n := runs.Load(); n != 3 {
		t.Errorf("the step's function ran %d times, want 3", n)
	}
	s := wf.Steps[0]
	if s.Attempts != 3 || !strings.Contains(s.Output, `"attempt":3`) || !strings.Contains(s.Output, `"first":"chaosllm answer`) {
		t.Errorf("step: attempts %d, output %s", s.Attempts, s.Output)
	}
	if s.Target != "code:two_calls" || s.Usage.PromptTokens == 0 {
		t.Errorf("step target %q, usage %+v", s.Target, s.Usage)
	}
}

// with: renders templates over the input and ancestors; a string that is
// exactly one action keeps its JSON value; the code step's value is JSON to
// its dependents.
func TestCodeStepArgumentsAndOutputs(t *testing.T) {
	type args struct {
		Items []string `json:"items"`
		N     int      `json:"n"`
		Text  string   `json:"text"`
		Fixed []int    `json:"fixed"`
	}
	got := make(chan args, 1)
	e := testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{
		"count": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			var a args
			if err := s.Args(&a); err != nil {
				return nil, engine.ToDeadLetter(err)
			}
			got <- a
			return map[string]any{"total": a.N * 10, "first": a.Items[0]}, nil
		}}})
	src := `name: args
input: { list: [a, b, c] }
steps:
  - id: count
    run: count
    with: { items: "{{ .Input.list }}", n: "{{ len .Input.list }}", text: "n={{ len .Input.list }}", fixed: [1, 2] }
  - id: say
    depends_on: [count]
    route: solo
    prompt: "total {{ .Steps.count.JSON.total }} first {{ .Steps.count.JSON.first }}"
`
	id := e.Submit(t, e.Spec(src))
	wf := e.Wait(t, id, 20*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
	if wf.State != store.StateCompleted {
		t.Fatalf("workflow %s: %+v", wf.State, wf.Steps)
	}
	a := <-got
	if strings.Join(a.Items, ",") != "a,b,c" || a.N != 3 || a.Text != "n=3" || len(a.Fixed) != 2 {
		t.Fatalf("arguments %+v", a)
	}
	res, err := e.Client.Result(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Workflow.Steps[1].Output, "total 30 first a") {
		t.Errorf("the prompt did not see the code step's JSON: %q", res.Workflow.Steps[1].Output)
	}
}

// A panicking function is recovered: the attempt fails (class handler),
// is retried, and is dead-lettered with the panic's message; the workflow
// is blocked and the worker goes on serving.
func TestCodeStepPanicIsRetriedThenDeadLettered(t *testing.T) {
	var runs atomic.Int32
	e := testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{
		"boom": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			runs.Add(1)
			var items []int
			return items[s.Attempt()], nil // a real runtime panic: index out of range
		},
		"fine": func(ctx context.Context, s *engine.CodeStep) (any, error) { return "ok", nil },
	}})
	id := e.Submit(t, e.Spec("name: panics\nsteps:\n  - { id: p, run: boom, max_retries: 1 }\n"))
	wf := e.Wait(t, id, 30*time.Second, store.StateBlocked, store.StateFailed, store.StateCompleted)
	if wf.State != store.StateBlocked || wf.Steps[0].State != store.StepDead {
		t.Fatalf("workflow %s, step %+v", wf.State, wf.Steps[0])
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("the function ran %d times, want 2 (one retry)", n)
	}
	if e := wf.Steps[0].Error; !strings.Contains(e, "handler: panic: runtime error: index out of range") {
		t.Errorf("dead step's reason %q does not carry the panic", e)
	}
	id2 := e.Submit(t, e.Spec("name: after\nsteps:\n  - { id: f, run: fine }\n"))
	if wf := e.Wait(t, id2, 20*time.Second, store.StateCompleted, store.StateBlocked); wf.State != store.StateCompleted {
		t.Fatalf("the worker does not serve after the panic: %s", wf.State)
	}
}

// A step's verdicts: DeadLetter parks it at once with its reason,
// Degrade finishes it with the fallback value, RetryAfter waits.
func TestCodeStepVerdicts(t *testing.T) {
	t.Parallel() // its own database, worker and provider: it runs beside the others
	var retried atomic.Int32
	var firstAt, secondAt atomic.Int64
	e := testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{
		"park": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			return nil, engine.ToDeadLetter(errors.New("the query names a table that does not exist"))
		},
		"lesser": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			return nil, engine.Degrade(map[string]any{"rows": []any{}}, errors.New("warehouse unavailable"))
		},
		"later": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			if retried.Add(1) == 1 {
				firstAt.Store(time.Now().UnixMilli())
				return nil, engine.RetryAfter(2*time.Second, errors.New("rate limited downstream"))
			}
			secondAt.Store(time.Now().UnixMilli())
			return 42, nil
		},
	}})
	src := "name: verdicts\nsteps:\n  - { id: a, run: park, optional: true }\n  - { id: b, run: lesser }\n  - { id: c, run: later, max_retries: 2 }\n"
	id := e.Submit(t, e.Spec(src))
	wf := e.Wait(t, id, 30*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
	byID := map[string]store.StepRecord{}
	for _, s := range wf.Steps {
		byID[s.ID] = s
	}
	if a := byID["a"]; a.State != store.StepDead || a.Attempts != 1 || !strings.Contains(a.Error, "does not exist") || a.Class != string(retry.Handler) {
		t.Errorf("dead-lettered step: %+v", a)
	}
	if b := byID["b"]; b.State != store.StepDone || !b.Degraded || b.Output != `{"rows":[]}` {
		t.Errorf("degraded step: %+v", b)
	}
	if c := byID["c"]; c.State != store.StepDone || c.Output != "42" || c.Attempts != 2 {
		t.Errorf("retried step: %+v", c)
	}
	if gap := time.Duration(secondAt.Load()-firstAt.Load()) * time.Millisecond; gap < 2*time.Second {
		t.Errorf("retried after %s, asked for no sooner than 2s", gap)
	}
	dls := waitDeadLetters(t, e, string(retry.Handler))
	if len(dls) != 1 {
		t.Fatalf("want one dead letter of class handler, got %+v", dls)
	}
	if r := dls[0].Reason; strings.Contains(r, "skip retry") || !strings.Contains(r, "does not exist") {
		t.Errorf("dead letter's reason %q: want the step's reason without asynq's \"skip retry\"", r)
	}
}
