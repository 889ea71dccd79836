package engine_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// A code step's calls are priced one by one, on the target that answered
// each, and its record holds what the answers it used cost: the first
// call's, made by the first attempt and replayed by the third, and the
// second's, made by the third (the second call fails twice). The
// workflow's cost is then known, though the step's own target
// ("code:…") has no price.
func TestCodeStepCallsArePricedIntoItsRecord(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true,
		Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{{Requests: 1}, {Requests: 2, Fault: &chaosllm.Fault{Status: 500}}, {}}},
		Steps: map[string]engine.StepFunc{"two_calls": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			var tokens int
			for _, q := range []string{"first question", "second question"} {
				resp, err := s.LLM().Chat(ctx, "solo", ask(q))
				if err != nil {
					return nil, err
				}
				tokens += resp.Usage.PromptTokens + 2*resp.Usage.CompletionTokens
			}
			return tokens, nil // what both answers cost at 1 a prompt token and 2 a completion token
		}}})
	e.Config.Prices = map[string]config.Price{"oa/m-solo": {Prompt: 1_000_000, Completion: 2_000_000}}
	e.StartWorker(t)
	id := e.Submit(t, e.Spec("name: priced\nsteps:\n  - { id: c, run: two_calls, max_retries: 3 }\n"))
	wf := e.Wait(t, id, 30*time.Second, store.StateCompleted, store.StateBlocked)
	if wf.State != store.StateCompleted {
		t.Fatalf("workflow %s: %+v", wf.State, wf.Steps)
	}
	s := wf.Steps[0]
	if s.Attempts != 3 {
		t.Fatalf("attempts %d, want 3 (the first call replayed by the last)", s.Attempts)
	}
	want := s.Output // the step's own sum, as JSON
	if u := s.Usage; u.PromptTokens == 0 || float64(u.PromptTokens+2*u.CompletionTokens) != s.CostUSD || want != formatCost(s.CostUSD) {
		t.Errorf("step usage %+v, cost %v; both answers cost %s", u, s.CostUSD, want)
	}
	if got, ok := flow.Cost(wf, nil); !ok || got != s.CostUSD {
		t.Errorf("workflow cost %v %v, want %v", got, ok, s.CostUSD)
	}
}

func formatCost(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// What a workflow spent is counted by the provider that answered each
// call: a code step's calls on two providers and a map's instances each
// count toward their own provider (not "code:…" or "map"), and the sums
// are the priced llm.call events'.
func TestCostByTheProviderThatAnswered(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true,
		Steps: map[string]engine.StepFunc{"both": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			for _, route := range []string{"solo", "limited"} {
				if _, err := s.LLM().Chat(ctx, route, ask("question for "+route)); err != nil {
					return nil, err
				}
			}
			return "asked", nil
		}}})
	e.Config.Prices = map[string]config.Price{"oa/m-solo": {Prompt: 1_000_000, Completion: 2_000_000}, "capped/m-capped": {Prompt: 3_000_000, Completion: 3_000_000}}
	e.StartWorker(t)
	id := e.Submit(t, e.Spec(`name: spend
steps:
  - { id: c, run: both }
  - { id: m, route: solo, for_each: "{{ .Input.items }}", prompt: "item {{ .Item }}" }
input: { items: [x, y] }
`))
	wf := e.Wait(t, id, 30*time.Second, store.StateCompleted, store.StateBlocked)
	if wf.State != store.StateCompleted {
		t.Fatalf("workflow %s: %+v", wf.State, wf.Steps)
	}
	evs, err := e.Store.Events(context.Background(), id, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{}
	calls := 0
	for _, ev := range evs {
		if ev.Type == "llm.call" {
			want[ev.Provider] += ev.CostUSD
			calls++
		}
	}
	by := flow.CostByProvider(wf)
	if calls != 4 || len(by) != 2 || by["oa"] == 0 || by["capped"] == 0 || !near(by["oa"], want["oa"]) || !near(by["capped"], want["capped"]) {
		t.Fatalf("%d calls; cost by provider %v, the calls' %v", calls, by, want)
	}
	if total, ok := flow.Cost(wf, nil); !ok || !near(total, by["oa"]+by["capped"]) {
		t.Fatalf("workflow cost %v %v, by provider %v", total, ok, by)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
