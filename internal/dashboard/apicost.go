package dashboard

import (
	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/tasks"
)

// workflowWithCost is a workflow as the API shows it: its record and, when
// every step that used tokens is priced, what it cost in all and by who
// answered (the configuration's prices' currency).
type workflowWithCost struct {
	*tasks.Workflow
	CostUSD        *float64           `json:"cost_usd,omitempty"`
	CostByProvider map[string]float64 `json:"cost_by_provider,omitempty"`
}

func (s *Server) withCost(wf *tasks.Workflow) workflowWithCost {
	out := workflowWithCost{Workflow: wf}
	if c, ok := tasks.Cost(wf, app.Prices(s.o.Config)); ok && c > 0 {
		out.CostUSD, out.CostByProvider = &c, tasks.CostByProvider(wf)
	}
	return out
}
