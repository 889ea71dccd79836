package client

import (
	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/producer"
)

// Cost is a workflow's priced cost with the configuration's prices; false
// when no step's target has a price.
func (c *Client) Cost(wf *producer.Workflow) (float64, bool) { return flow.Cost(wf, app.Prices(c.cfg)) }

// Priced says the configuration prices any target.
func (c *Client) Priced() bool { return len(c.cfg.Prices) > 0 }

// CostByProvider is " (oa 0.0100, an 0.0023)": a workflow's priced cost by
// who answered, for status and the workflow page; empty when one paid all.
func CostByProvider(wf *producer.Workflow) string {
	return flow.CostByProviderText(flow.CostByProvider(wf))
}
