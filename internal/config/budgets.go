package config

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Budget caps the tokens and the spend of the calls on one route, or to
// one provider (on any route), per period, for every worker together
// (docs/budgets.md). A call the budget cannot take is not sent: it fails
// as budget_exceeded. The zero value is not valid: name, one of route and
// provider, a period and a cap are required.
type Budget struct {
	// Name names the budget in errors, metrics and Redis: letters,
	// digits, ".", "_" and "-", at most 64.
	Name string `yaml:"name"`
	// Route is the route whose calls count (fallback targets included).
	Route string `yaml:"route"`
	// Provider is the provider whose calls count, on every route.
	Provider string `yaml:"provider"`
	// Period is how long the budget lasts before it starts over: windows
	// of this length since the Unix epoch (24h: UTC days). At least 1m.
	Period Duration `yaml:"period"`
	// Tokens caps prompt plus completion tokens per period; 0: no cap.
	Tokens int64 `yaml:"tokens"`
	// USD caps spend per period, in the currency of prices (which every
	// target the budget covers must have); 0: no cap.
	USD float64 `yaml:"usd"`
}

var budgetName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// BudgetTargets are the targets ("provider/model") whose calls count
// against b, in order: its route's targets and fallbacks, or every target
// of any route on its provider.
func (c *Config) BudgetTargets(b Budget) []string {
	seen := map[string]bool{}
	var out []string
	add := func(t *Target) {
		if t != nil && !seen[t.String()] && (b.Route != "" || t.Provider == b.Provider) {
			seen[t.String()] = true
			out = append(out, t.String())
		}
	}
	for _, name := range c.RouteNames() {
		if b.Route != "" && name != b.Route {
			continue
		}
		r := c.Routes[name]
		for i := range r.Targets {
			add(&r.Targets[i])
		}
		add(r.ContextWindowFallback)
		add(r.ContentFallback)
	}
	return out
}

// validateBudgets checks each budget: a unique name, exactly one known
// route or provider, a period of a minute or more, a cap, and a price for
// every target a spend cap covers.
func (c *Config) validateBudgets() []error {
	var errs []error
	seen := map[string]bool{}
	for i, b := range c.Budgets {
		f := fmt.Sprintf("budgets[%d]", i)
		bad := func(field, format string, a ...any) {
			errs = append(errs, &FieldError{Field: f + "." + field, Msg: fmt.Sprintf(format, a...)})
		}
		switch {
		case b.Name == "":
			bad("name", "is empty")
		case !budgetName.MatchString(b.Name):
			bad("name", "%q: want letters, digits, '.', '_' or '-' (at most 64)", b.Name)
		case seen[b.Name]:
			bad("name", "%q is used by another budget", b.Name)
		}
		seen[b.Name] = true
		target := true
		switch {
		case b.Route == "" && b.Provider == "":
			bad("route", "set route or provider: what the budget covers")
			target = false
		case b.Route != "" && b.Provider != "":
			bad("route", "set route or provider, not both")
			target = false
		case b.Route != "":
			if _, ok := c.Routes[b.Route]; !ok {
				bad("route", "unknown route %q", b.Route)
				target = false
			}
		default:
			if _, ok := c.Provider(b.Provider); !ok {
				bad("provider", "unknown provider %q", b.Provider)
				target = false
			}
		}
		if b.Period.D() < time.Minute {
			bad("period", "%s is under 1m (e.g. 1h, 24h)", b.Period)
		}
		switch {
		case b.Tokens < 0:
			bad("tokens", "is negative")
		case b.USD < 0:
			bad("usd", "is negative")
		case b.Tokens == 0 && b.USD == 0:
			bad("tokens", "set tokens or usd (or both) above 0")
		}
		if b.USD > 0 && target {
			var missing []string
			for _, t := range c.BudgetTargets(b) {
				if _, ok := c.Prices[t]; !ok {
					missing = append(missing, t)
				}
			}
			if len(missing) > 0 {
				sort.Strings(missing)
				bad("usd", "needs prices for %s (prices.<provider/model>)", strings.Join(missing, ", "))
			}
		}
	}
	return errs
}
