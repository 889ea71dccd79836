package engine_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/retry"
)

// budgetConfig is the test configuration with budgets: route solo may
// spend 1 token an hour (every call is refused) and answers degraded steps
// with "over budget"; provider oa may spend 100,000 tokens an hour.
func budgetConfig(t *testing.T, e *testenv.Env) config.Config {
	t.Helper()
	yaml := strings.Replace(testenv.ConfigYAML, "solo:  { targets: [ { provider: oa, model: m-solo } ] }",
		`solo:  { targets: [ { provider: oa, model: m-solo } ], fallback_text: "over budget" }`, 1) + `
budgets:
  - { name: solo-tiny, route: solo, period: 1h, tokens: 1 }
  - { name: oa-hour, provider: oa, period: 1h, tokens: 100000 }
`
	vars := map[string]string{"CHAOS": e.URL, "K1": testenv.Keys[0], "K2": testenv.Keys[1]}
	cfg, err := config.Load(config.Input{Path: "budgets.yaml", Data: []byte(yaml),
		LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(yaml, `fallback_text: "over budget"`) {
		t.Fatal("testenv.ConfigYAML's solo route changed; update this test's copy")
	}
	cfg.Redis.Addr, cfg.Redis.DB = e.DB.Addr, e.DB.DB
	return cfg
}

// A call a budget refuses is never sent: a step with degrade: template
// answers with its route's fallback_text, one without is dead-lettered at
// once (no retry) with the budget named; a call the budgets admit counts
// its real usage in agentq_budget_spent_total.
func TestBudgetRefusedStepsDegradeOrDeadLetter(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true, Metrics: true})
	e.Config = budgetConfig(t, e)
	e.StartWorker(t)
	id := e.Submit(t, e.Spec(`
name: budgets
defaults: { max_retries: 3 }
steps:
  - { id: ok, route: main, prompt: "hello" }
  - { id: soft, route: solo, prompt: "hello", degrade: template }
  - { id: hard, route: solo, prompt: "hello" }
`))
	wf := e.Wait(t, id, 15*time.Second, store.StateBlocked)
	// blocked comes with hard's dead letter, which needs no call: ok may
	// still be running then
	poll.Until(t, 15*time.Second, func() (bool, string) {
		var err error
		if wf, err = e.Store.Get(t.Context(), id); err != nil {
			return false, err.Error()
		}
		return wf.Steps[0].State != store.StepRunning && wf.Steps[0].State != store.StepPending, "step ok still " + wf.Steps[0].State
	})
	ok, soft, hard := wf.Steps[0], wf.Steps[1], wf.Steps[2]
	if ok.State != store.StepDone || ok.Target != "oa/m-oa" {
		t.Errorf("ok = %+v", ok)
	}
	if soft.State != store.StepDone || !soft.Degraded || soft.Output != "over budget" || !strings.Contains(soft.Error, "budget solo-tiny (1h)") {
		t.Errorf("soft = %+v, want the fallback text and the refusal", soft)
	}
	if hard.State != store.StepDead || hard.Class != string(retry.BudgetExceeded) || hard.Attempts != 1 ||
		!strings.HasPrefix(hard.Error, "budget_exceeded") || !strings.Contains(hard.Error, "budget solo-tiny (1h) has 1 tokens left") {
		t.Errorf("hard = %+v, want dead at once with the budget named", hard)
	}
	if n := e.Chaos.Snapshot().Total; n != 1 {
		t.Errorf("chaosllm saw %d calls, want 1 (the refused ones are never sent)", n)
	}
	if n := e.Calls.Count("oa/m-solo", ""); n != 0 {
		t.Errorf("%d calls to oa/m-solo, want none", n)
	}
	body := scrape(t, e.MetricsURL)
	if v := value(t, body, `agentq_budget_refused_total{budget="solo-tiny"}`); v != 2 {
		t.Errorf("refused = %v, want 2", v)
	}
	spent := value(t, body, `agentq_budget_spent_total{budget="oa-hour",unit="tokens"}`)
	if want := float64(ok.Usage.PromptTokens + ok.Usage.CompletionTokens); spent != want || want == 0 {
		t.Errorf("spent = %v, want the ok step's usage %v", spent, want)
	}
	if strings.Contains(body, `agentq_budget_spent_total{budget="solo-tiny"`) {
		t.Error("the refused calls spent on solo-tiny")
	}
	t.Logf("the dead step: %s", hard.Error)
}

// A workflow's own budget covers all its steps together: 20 steps at once
// against a budget that admits 10 calls' reservations send at most 10
// calls to the provider; the rest are refused budget_exceeded, dead-lettered
// at once, and what was spent stays within the budget.
func TestWorkflowBudgetIsNeverOverspentUnderConcurrency(t *testing.T) {
	// answers take 2s, so the 20 steps hold their reservations at once
	e := testenv.Start(t, testenv.Options{NoWorker: true, Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Latency: chaosllm.Latency{Min: chaosllm.Duration(2 * time.Second), Max: chaosllm.Duration(2 * time.Second)}}}}})
	e.Config.Worker.Concurrency = 20 // every step at once
	var b strings.Builder
	// each call reserves its prompt (2 tokens at 4 bytes a token) and its
	// max_tokens (100): 102; the budget admits 10 of them at once
	b.WriteString("name: capped\nbudget: { tokens: 1020 }\ndefaults: { route: main, max_retries: 0 }\nsteps:\n")
	for i := range 20 {
		fmt.Fprintf(&b, "  - { id: s%02d, prompt: \"hi %02d\", max_tokens: 100 }\n", i, i)
	}
	id := e.Submit(t, e.Spec(b.String()))
	e.StartWorker(t)
	var wf *store.Workflow
	poll.Until(t, 30*time.Second, func() (bool, string) { // blocked at the first refusal: wait for every step
		var err error
		if wf, err = e.Store.Get(t.Context(), id); err != nil {
			return false, err.Error()
		}
		open := 0
		for _, s := range wf.Steps {
			if s.State != store.StepDone && s.State != store.StepDead {
				open++
			}
		}
		return open == 0, fmt.Sprintf("%d steps not settled", open)
	})
	done, refused, spent := 0, 0, 0
	for _, s := range wf.Steps {
		switch {
		case s.State == store.StepDone:
			done++
			spent += s.Usage.PromptTokens + s.Usage.CompletionTokens
		case s.State == store.StepDead && s.Class == string(retry.BudgetExceeded) && strings.Contains(s.Error, "workflow "+id):
			refused++
			if strings.Contains(s.Error, "resets at") || !strings.Contains(s.Error, "it does not reset") {
				t.Errorf("step %s: a workflow budget's refusal %q says it resets", s.ID, s.Error)
			}
		default:
			t.Errorf("step %s: %s %s %q", s.ID, s.State, s.Class, s.Error)
		}
	}
	calls := e.Chaos.Snapshot().Total
	if calls != done || done+refused != 20 || done > 10 || refused == 0 {
		t.Fatalf("%d calls answered, %d steps done, %d refused: want every step done or refused, some refused, no call unaccounted", calls, done, refused)
	}
	if spent > 1020 {
		t.Fatalf("the workflow spent %d tokens, over its budget of 1020", spent)
	}
}
