package engine

import (
	"context"
	"math"

	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/internal/spec"
)

// withBudget makes every LLM call of workflow wf's attempt reserve on the
// workflow's budget, if it has one.
func withBudget(ctx context.Context, wf string, wspec *spec.Spec) context.Context {
	if wspec.Budget == nil {
		return ctx
	}
	return router.WithBudget(ctx, router.Budget{Name: "workflow " + wf, Tokens: wspec.Budget.Tokens,
		MicroUSD: int64(math.Round(wspec.Budget.USD * 1e6))}, "wf:"+wf)
}
