package spec

import (
	"math"
)

// BudgetSpec is a workflow's own budget (budget: in its spec): what all its
// LLM calls together may spend over its life, reserved before each call
// and settled with its real usage, cluster-wide (the router's budget
// policy, as for the configuration's budgets). A call that would pass it
// is not sent: class budget_exceeded.
type BudgetSpec struct {
	Tokens int64   `yaml:"tokens" json:"tokens,omitempty"` // prompt plus completion tokens; 0: no cap
	USD    float64 `yaml:"usd" json:"usd,omitempty"`       // spend at the configuration's prices; 0: no cap
}

// checkBudget checks a spec's budget.
func (s *Spec) checkBudget(bad func(int, string, string, ...any)) {
	b := s.Budget
	if b == nil {
		return
	}
	if b.Tokens < 0 {
		bad(0, "budget.tokens", "is negative")
	}
	if b.USD < 0 || math.IsNaN(b.USD) || math.IsInf(b.USD, 0) {
		bad(0, "budget.usd", "is not a positive amount")
	}
	if b.Tokens == 0 && b.USD == 0 {
		bad(0, "budget", "caps nothing: set tokens or usd")
	}
}
