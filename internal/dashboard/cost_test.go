package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/llmclient"
)

// The API's workflow says what it cost at the configuration's prices, in
// all and by the provider that answered each call (a prompt step's and a
// code step's, both on oa), and so does the workflow page.
func TestAPIWorkflowSaysWhatItCost(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true, Steps: map[string]engine.StepFunc{
		"ask": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			resp, err := s.LLM().Chat(ctx, "solo", llmclient.Request{Messages: []llmclient.Message{{Role: "user", Content: "and you?"}}})
			if err != nil {
				return nil, err
			}
			return resp.Text, nil
		}}})
	e.Config.Prices = map[string]config.Price{"oa/m-solo": {Prompt: 1_000_000, Completion: 2_000_000}}
	e.StartWorker(t)
	d := serveDash(t, e, dashboard.Options{Token: token})
	id := e.Submit(t, e.Spec("name: priced\nsteps:\n  - { id: a, route: solo, prompt: hello }\n  - { id: b, run: ask }\n"))
	wf := e.Wait(t, id, 20*time.Second, store.StateCompleted)
	a, b := wf.Steps[0].CostUSD, wf.Steps[1].CostUSD
	if a <= 0 || b <= 0 {
		t.Fatalf("steps' costs %v and %v, want both priced", a, b)
	}
	r := d.do(t, call{Path: "/api/v1/workflows/" + id, Bearer: token})
	var got struct {
		State          string             `json:"state"`
		CostUSD        *float64           `json:"cost_usd"`
		CostByProvider map[string]float64 `json:"cost_by_provider"`
	}
	if r.Code != 200 || json.Unmarshal([]byte(r.Body), &got) != nil {
		t.Fatalf("GET workflow: %d %s", r.Code, r.Body)
	}
	if got.State != "completed" || got.CostUSD == nil || *got.CostUSD != a+b || !near(got.CostByProvider["oa"], a+b) || len(got.CostByProvider) != 1 {
		t.Fatalf("cost %v by provider %v, want %v (all oa's)", got.CostUSD, got.CostByProvider, a+b)
	}
	page := d.do(t, call{Path: "/workflows/" + id, Cookie: d.signIn(t, token)})
	// one provider paid all: no breakdown
	if want := fmt.Sprintf("cost %.4f</p>", a+b); page.Code != 200 || !strings.Contains(page.Body, want) {
		t.Fatalf("workflow page: %d, no %q in it", page.Code, want)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
