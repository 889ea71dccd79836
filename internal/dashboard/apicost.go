package dashboard

import (
	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/producer"
)

// workflowWithCost is a workflow as the API shows it: its record and, when
// every step that used tokens is priced, what it cost in all and by who
// answered (the configuration's prices' currency).
type workflowWithCost struct {
	*producer.Workflow
	CostUSD        *float64           `json:"cost_usd,omitempty"`
	CostByProvider map[string]float64 `json:"cost_by_provider,omitempty"`
}

func (s *Server) withCost(wf *producer.Workflow) workflowWithCost {
	out := workflowWithCost{Workflow: wf}
	if c, ok := s.client.Cost(wf); ok && c > 0 {
		out.CostUSD, out.CostByProvider = &c, flow.CostByProvider(wf)
	}
	return out
}
