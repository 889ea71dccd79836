package flow

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/router"
)

// Price is what a target ("provider/model") charges per million tokens.
type Price = router.Price

// Cost is a workflow's cost under prices; false if a step that used tokens
// ran on a target without a price.
func Cost(wf *record.Workflow, prices map[string]Price) (float64, bool) {
	total := 0.0
	for _, s := range wf.Steps {
		if s.CostUSD > 0 { // priced by the worker when it was recorded
			total += s.CostUSD
			continue
		}
		if s.Usage.PromptTokens+s.Usage.CompletionTokens == 0 {
			continue
		}
		p, ok := prices[s.Target]
		if !ok {
			return 0, false
		}
		total += (float64(s.Usage.PromptTokens)*p.PromptPerMTok + float64(s.Usage.CompletionTokens)*p.CompletionPerMTok) / 1e6
	}
	return total, true
}

// CostByProvider is a workflow's priced cost by the provider that
// answered: counted call by call by the workers (Workflow.CostByProvider),
// else, for a workflow run before they counted, the provider of each
// step's target ("map" for a map step). Steps without a cost are left out.
func CostByProvider(wf *record.Workflow) map[string]float64 {
	if len(wf.CostByProvider) > 0 {
		return wf.CostByProvider
	}
	by := map[string]float64{}
	for _, s := range wf.Steps {
		if s.CostUSD <= 0 {
			continue
		}
		p, _, _ := strings.Cut(s.Target, "/")
		if s.Map != nil {
			p = "map"
		}
		by[p] += s.CostUSD
	}
	return by
}

// CostByProviderText is " (oa 0.0100, an 0.0023)": a cost by provider
// (CostByProvider) as status and the workflow page show it, providers in
// name order; empty when one paid all.
func CostByProviderText(by map[string]float64) string {
	if len(by) < 2 {
		return ""
	}
	names := slices.Sorted(maps.Keys(by))
	parts := make([]string, len(names))
	for i, p := range names {
		parts[i] = fmt.Sprintf("%s %.4f", p, by[p])
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
