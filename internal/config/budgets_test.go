package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/problem"
)

// Budgets load as written; a provider budget covers that provider's
// targets on every route.
func TestBudgetsConfig(t *testing.T) {
	c, err := config.Load(config.Input{Path: write(t, good+`
prices:
  openai/gpt-4.1: { prompt_per_mtok: 2, completion_per_mtok: 8 }
budgets:
  - { name: report-hourly, route: report, period: 1h, tokens: 200000 }
  - { name: openai-daily, provider: openai, period: 24h, tokens: 5000000, usd: 25 }
`), LookupEnv: env(map[string]string{"OA_KEY": "k", "AN_KEY": "k"})})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Budgets) != 2 || c.Budgets[1].Period.D() != 24*time.Hour || c.Budgets[1].USD != 25 || c.Budgets[0].Tokens != 200000 {
		t.Fatalf("budgets = %+v", c.Budgets)
	}
	if got := strings.Join(c.BudgetTargets(c.Budgets[1]), " "); got != "openai/gpt-4.1" {
		t.Fatalf("openai-daily covers %q", got)
	}
	if got := strings.Join(c.BudgetTargets(c.Budgets[0]), " "); got != "anthropic/claude-sonnet-4-5 openai/gpt-4.1" {
		t.Fatalf("report-hourly covers %q", got)
	}
}

// Each problem is one line naming budgets[i] and the field.
func TestBudgetsConfigProblems(t *testing.T) {
	base := env(map[string]string{"OA_KEY": "k", "AN_KEY": "k"})
	for name, c := range map[string]struct{ block, want string }{
		"no name":        {`{ route: report, period: 1h, tokens: 10 }`, `budgets[0].name: is empty`},
		"bad name":       {`{ name: "a b", route: report, period: 1h, tokens: 10 }`, `budgets[0].name: "a b": want letters, digits`},
		"neither":        {`{ name: b, period: 1h, tokens: 10 }`, `budgets[0].route: set route or provider`},
		"both":           {`{ name: b, route: report, provider: openai, period: 1h, tokens: 10 }`, `budgets[0].route: set route or provider, not both`},
		"unknown route":  {`{ name: b, route: nope, period: 1h, tokens: 10 }`, `budgets[0].route: unknown route "nope"`},
		"unknown prov":   {`{ name: b, provider: nope, period: 1h, tokens: 10 }`, `budgets[0].provider: unknown provider "nope"`},
		"short period":   {`{ name: b, route: report, period: 30s, tokens: 10 }`, `budgets[0].period: 30s is under 1m`},
		"no period":      {`{ name: b, route: report, tokens: 10 }`, `budgets[0].period: 0s is under 1m`},
		"no cap":         {`{ name: b, route: report, period: 1h }`, `budgets[0].tokens: set tokens or usd`},
		"negative":       {`{ name: b, route: report, period: 1h, tokens: -1 }`, `budgets[0].tokens: is negative`},
		"usd no prices":  {`{ name: b, route: report, period: 1h, usd: 5 }`, `budgets[0].usd: needs prices for anthropic/claude-sonnet-4-5, openai/gpt-4.1 (prices.<provider/model>)`},
		"usd provider":   {`{ name: b, provider: anthropic, period: 1h, usd: 5 }`, `budgets[0].usd: needs prices for anthropic/claude-sonnet-4-5`},
		"negative usd":   {`{ name: b, provider: openai, period: 1h, usd: -5 }`, `budgets[0].usd: is negative`},
		"bad period str": {`{ name: b, route: report, period: soon, tokens: 10 }`, `bad duration "soon"`},
	} {
		_, err := config.Load(config.Input{Path: write(t, good+"\nbudgets:\n  - "+c.block+"\n"), LookupEnv: base})
		lines := problem.Lines(err)
		if len(lines) != 1 || !strings.Contains(lines[0], c.want) {
			t.Errorf("%s: %q, want one problem saying %q", name, lines, c.want)
		}
	}
	two := "\nbudgets:\n  - { name: a, route: report, period: 1h, tokens: 1 }\n  - { name: a, provider: openai, period: 1h, tokens: 1 }\n"
	_, err := config.Load(config.Input{Path: write(t, good+two), LookupEnv: base})
	if lines := problem.Lines(err); len(lines) != 1 || !strings.Contains(lines[0], `budgets[1].name: "a" is used by another budget`) {
		t.Errorf("a name used twice: %q", lines)
	}
}
