package producer_test

import (
	"math"
	"testing"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/store"
)

func TestUsageAndCost(t *testing.T) {
	wf := &producer.Workflow{Steps: []producer.StepRecord{
		{Target: "oa/m", Usage: store.Usage{PromptTokens: 1000, CompletionTokens: 500}},
		{Target: "an/m", Usage: store.Usage{PromptTokens: 2000, CompletionTokens: 0}},
		{Target: "template"}, // a degraded answer uses no tokens and needs no price
	}}
	if u := producer.Usage(wf); u.PromptTokens != 3000 || u.CompletionTokens != 500 {
		t.Fatalf("usage %+v", u)
	}
	prices := map[string]flow.Price{"oa/m": {PromptPerMTok: 2, CompletionPerMTok: 8}, "an/m": {PromptPerMTok: 3, CompletionPerMTok: 15}}
	if c, ok := flow.Cost(wf, prices); !ok || math.Abs(c-(0.002+0.004+0.006)) > 1e-12 {
		t.Fatalf("cost %v %v", c, ok)
	}
	delete(prices, "an/m")
	if _, ok := flow.Cost(wf, prices); ok {
		t.Fatal("a cost without every target's price")
	}
}
