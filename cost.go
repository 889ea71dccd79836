package agentq

import "github.com/agentq/agentq/internal/flow"

// Cost is workflow wf's cost in USD: each step's as the worker priced it
// when it recorded the step, else its tokens at the client's
// configuration's prices (prices:). priced is false when a step that used
// tokens ran on a target with no price (the cost is unknown then).
func (c *Client) Cost(wf *Workflow) (usd float64, priced bool) { return c.c.Cost(wf) }

// Priced reports whether the client's configuration prices any target
// (prices:): without prices, a cost of 0 says nothing.
func (c *Client) Priced() bool { return c.c.Priced() }

// CostByProvider is workflow wf's cost in USD by the provider that
// answered: as the workers counted it call by call, else, for a workflow
// run before they did, by the provider of each step's target ("map" for a
// map step). Steps without a cost are left out.
func CostByProvider(wf *Workflow) map[string]float64 { return flow.CostByProvider(wf) }
