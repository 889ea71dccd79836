package router

import "context"

// A budget can also travel with a call's context: a workflow's own
// (budget: in its spec) covers every call its steps make, whatever the
// route or provider, for the workflow's whole life (period 0).

type ctxBudgetsKey struct{}

// ctxBudget is a budget carried by a context, with its ledger key.
type ctxBudget struct {
	Budget
	key string
}

// WithBudget returns ctx carrying b: every call made with it (or a
// context derived from it) also reserves on b, under ledger key key (one
// per budget, e.g. "wf:<id>"), as configured budgets do. b.Period 0: one
// window for the key's life. The router enforces it only when it has a
// ledger (RouterOptions.Budgets.Ledger).
func WithBudget(ctx context.Context, b Budget, key string) context.Context {
	prev, _ := ctx.Value(ctxBudgetsKey{}).([]ctxBudget)
	next := make([]ctxBudget, 0, len(prev)+1)
	for _, p := range prev {
		if p.key != key { // the same ledger twice would reserve every call twice
			next = append(next, p)
		}
	}
	return context.WithValue(ctx, ctxBudgetsKey{}, append(next, ctxBudget{Budget: b, key: key}))
}

// callBudgets are the budgets a context carries.
func callBudgets(ctx context.Context) []ctxBudget {
	v, _ := ctx.Value(ctxBudgetsKey{}).([]ctxBudget)
	return v
}
