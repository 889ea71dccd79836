package app

import (
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/internal/store"
)

// routerBudgets are the configuration's budgets as the router enforces
// them: reservations in Redis (store.Budgets, leased for longer than any
// call may last), spend priced by the configured prices, and obs (the
// metrics) told of spend and refusals. With none configured the ledger is
// there all the same, for workflows' own budgets (budget: in a spec).
func routerBudgets(cfg config.Config, rdb redis.UniversalClient, obs router.BudgetObserver) router.Budgets {
	out := router.Budgets{Prices: Prices(cfg), Observer: obs,
		Ledger: store.NewBudgets(rdb, store.BudgetOptions{Lease: max(10*time.Minute, maxProviderTimeout(cfg)+time.Minute), Keep: cfg.Retention.D()})}
	for _, b := range cfg.Budgets {
		out.List = append(out.List, router.Budget{Name: b.Name, Route: b.Route, Provider: b.Provider, Period: b.Period.D(),
			Tokens: b.Tokens, MicroUSD: int64(math.Round(b.USD * 1e6))})
	}
	return out
}
