package engine_test

import (
	"math"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// A completed child's tokens and cost are its parent's too: the child
// workflow step carries them (its usage and cost, its step.done event),
// so the parent's usage, its cost and its cost by provider include the
// child's.
func TestAParentsUsageAndCostIncludeItsChilds(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Configure: func(c *config.Config) {
		c.Prices = map[string]config.Price{"oa/m-solo": {Prompt: 2, Completion: 8}}
	}})
	if _, err := e.Client.PutSpec(t.Context(), "sub", e.Spec(subSpec)); err != nil {
		t.Fatal(err)
	}
	id := e.Submit(t, e.Spec(`name: parent
steps:
  - { id: own, route: solo, prompt: "the parent's own question" }
  - { id: sub, depends_on: [own], workflow: { spec: sub, input: { q: "x" } } }
`))
	parent := e.Wait(t, id, 20*time.Second, store.StateCompleted)
	kids, err := e.Store.Children(t.Context(), id)
	if err != nil || len(kids) != 1 {
		t.Fatalf("children %v, %v", kids, err)
	}
	child, err := e.Store.Get(t.Context(), kids[0])
	if err != nil {
		t.Fatal(err)
	}
	usage := func(w *store.Workflow) (u store.Usage) {
		for _, s := range w.Steps {
			u.PromptTokens += s.Usage.PromptTokens
			u.CompletionTokens += s.Usage.CompletionTokens
		}
		return u
	}
	cost := func(w *store.Workflow) float64 {
		c, ok := flow.Cost(w, nil) // every step priced by the workers
		if !ok {
			t.Fatalf("workflow %s: a step without its cost: %+v", w.ID, w.Steps)
		}
		return c
	}
	cu, pu := usage(child), usage(parent)
	own := parent.Steps[0].Usage
	if cu.PromptTokens == 0 || cu.CompletionTokens == 0 {
		t.Fatalf("the child used no tokens: %+v", cu)
	}
	if pu.PromptTokens != own.PromptTokens+cu.PromptTokens || pu.CompletionTokens != own.CompletionTokens+cu.CompletionTokens {
		t.Fatalf("parent's usage %+v, want its own %+v and its child's %+v", pu, own, cu)
	}
	if s := parent.Steps[1]; s.Usage != cu {
		t.Fatalf("the child step's usage %+v, want the child's %+v", s.Usage, cu)
	}
	cc, pc := cost(child), cost(parent)
	if cc <= 0 || math.Abs(pc-(parent.Steps[0].CostUSD+cc)) > 1e-9 {
		t.Fatalf("parent's cost %v, want its own %v and its child's %v", pc, parent.Steps[0].CostUSD, cc)
	}
	if by := flow.CostByProvider(parent); math.Abs(by["oa"]-pc) > 1e-9 {
		t.Fatalf("parent's cost by provider %v, want oa %v (its own calls and its child's)", by, pc)
	}
}
