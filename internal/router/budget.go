package router

// Budgets: tokens and spend per route or provider per period, for every
// worker together. Before a call to a target the router reserves the most
// the call can spend on every budget that covers it; a budget that cannot
// take it refuses, and the call is not sent. After the call, each
// reservation is replaced by what the call really spent.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/agentq/agentq/llmclient"

	"github.com/agentq/agentq/retry"
)

// Budget caps what the calls on a route, or to a provider (on any route),
// may spend per period.
type Budget struct {
	Name string
	// Route or Provider (one of them) is what the budget covers: every
	// call on the route (its fallbacks too), or every call to the provider.
	Route, Provider string
	// Period: windows of this length since the Unix epoch; the budget
	// starts over in each (24h: UTC days).
	Period time.Duration
	// Tokens caps prompt plus completion tokens per period; 0: no cap.
	Tokens int64
	// MicroUSD caps spend per period, in millionths of the prices'
	// currency, priced by Budgets.Prices; 0: no cap.
	MicroUSD int64
}

// Price is what a target charges per million tokens.
type Price struct{ PromptPerMTok, CompletionPerMTok float64 }

// BudgetLedger keeps reservations against limits for every worker
// (internal/store's Budgets). Reserve admits amount under limit in key's
// window of period, or refuses it (ok false) and holds nothing; Settle
// replaces the reservation id by actual (0: all of it back). A reservation
// never settled lapses on its own.
type BudgetLedger interface {
	Reserve(ctx context.Context, key string, limit, amount int64, period time.Duration) (id string, ok bool, remaining int64, err error)
	Settle(ctx context.Context, key, id string, actual int64) error
}

// BudgetObserver hears what budgets spend and refuse (metrics).
type BudgetObserver interface {
	// BudgetSpent is what one call spent on a budget: unit "tokens", or
	// "usd" in the prices' currency.
	BudgetSpent(budget, unit string, amount float64)
	// BudgetRefused is a call a budget refused.
	BudgetRefused(budget string)
}

// Budgets are the router's budgets. The zero value has none.
type Budgets struct {
	List []Budget
	// Prices per target ("provider/model"); a spend cap counts only the
	// calls of targets that have one.
	Prices map[string]Price
	// Ledger keeps the reservations; nil: budgets are not enforced.
	Ledger BudgetLedger
	// Observer hears spend and refusals; nil: none.
	Observer BudgetObserver
}

// Budget units, as BudgetError.Unit and BudgetObserver name them.
const (
	UnitTokens = "tokens"
	UnitUSD    = "usd"
)

// BudgetError is a call that was not sent because a budget could not take
// it. Its class is budget_exceeded: the route tries its next target, and a
// step that no target could take ends with its route's fallback_text
// (degrade: template) or in the dead-letter queue.
type BudgetError struct {
	Target string // provider/model
	Budget string
	Period time.Duration
	Unit   string // UnitTokens or UnitUSD
	// Remaining is what the budget's window has left; Needed is what the
	// call would have held (tokens, or micro-units of currency for usd).
	Remaining, Needed int64
	// Resets is when the window ends.
	Resets time.Time
}

func (e *BudgetError) Error() string {
	left, need := fmt.Sprintf("%d tokens", max(e.Remaining, 0)), fmt.Sprintf("%d", e.Needed)
	if e.Unit == UnitUSD {
		left, need = fmt.Sprintf("$%.6f", float64(max(e.Remaining, 0))/1e6), fmt.Sprintf("$%.6f", float64(e.Needed)/1e6)
	}
	if e.Period <= 0 { // a cap on the whole of something (a workflow's budget): it never resets
		return fmt.Sprintf("%s: budget %s has %s left of its whole cap, the call needs up to %s; it does not reset (raise the cap and rerun); not called",
			e.Target, e.Budget, left, need)
	}
	return fmt.Sprintf("%s: budget %s (%s) has %s left, the call needs up to %s; it resets at %s; not called",
		e.Target, e.Budget, period(e.Period), left, need, e.Resets.UTC().Format(time.RFC3339))
}

// Class is budget_exceeded.
func (e *BudgetError) Class() retry.Class { return retry.BudgetExceeded }

// period prints 24h0m0s as 24h and 1h30m0s as 1h30m.
func period(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// budgets is the router's policy over Budgets: which budgets cover a call.
type budgets struct {
	byRoute, byProvider map[string][]Budget
	prices              map[string]Price
	ledger              BudgetLedger
	obs                 BudgetObserver
	r                   *Router
}

// newBudgets indexes o's budgets; nil when there is nothing to enforce.
func newBudgets(o Budgets, r *Router) *budgets {
	if o.Ledger == nil {
		return nil
	}
	b := &budgets{byRoute: map[string][]Budget{}, byProvider: map[string][]Budget{}, prices: o.Prices, ledger: o.Ledger, obs: o.Observer, r: r}
	for _, bu := range o.List {
		if bu.Route != "" {
			b.byRoute[bu.Route] = append(b.byRoute[bu.Route], bu)
		} else {
			b.byProvider[bu.Provider] = append(b.byProvider[bu.Provider], bu)
		}
	}
	return b
}

// spend is an amount in both units.
type spend struct{ tokens, micro int64 }

// hold is the reservations one call holds.
type hold struct {
	b      *budgets
	price  Price
	priced bool
	est    spend
	held   []held
}

type held struct {
	budget   string
	unit     string
	key, id  string
	estimate int64
}

// reserve holds the call's most on every budget covering it: the prompt
// at 4 bytes a token plus its max_tokens (what the adapters send when it
// is 0), priced at the target's price. A budget that cannot take it
// refuses the call (what was held is given back); a ledger that cannot be
// reached lets the call go and says so (Redis trouble must not stop every
// call, as with limits).
func (b *budgets) reserve(ctx context.Context, route string, t Target, req llmclient.Request) (*hold, error) {
	if b == nil {
		return nil, nil
	}
	rb, pb, cb := b.byRoute[route], b.byProvider[t.Provider.Name()], callBudgets(ctx)
	if len(rb)+len(pb)+len(cb) == 0 {
		return nil, nil
	}
	keys := map[string]string{} // a context's budgets have keys of their own
	for _, c := range cb {
		keys[c.Name] = c.key
		pb = append(pb[:len(pb):len(pb)], c.Budget)
	}
	prompt, completion := (int64(requestBytes(req))+3)/4, int64(maxTokens(req))
	h := &hold{b: b}
	h.price, h.priced = b.prices[t.String()]
	h.est = h.spend(llmclient.Usage{PromptTokens: int(prompt), CompletionTokens: int(completion)})
	for _, list := range [2][]Budget{rb, pb} {
		for _, bu := range list {
			for _, unit := range [2]string{UnitTokens, UnitUSD} {
				limit, amount := bu.Tokens, h.est.tokens
				if unit == UnitUSD {
					limit, amount = bu.MicroUSD, h.est.micro
					if !h.priced {
						continue // validation requires prices; an unpriced target spends nothing
					}
				}
				if limit <= 0 {
					continue
				}
				key := "cfg:" + bu.Name + ":" + unit
				if k, ok := keys[bu.Name]; ok {
					key = k + ":" + unit
				}
				id, ok, left, err := b.ledger.Reserve(ctx, key, limit, amount, bu.Period)
				if err != nil {
					b.r.log.Warn("budget unavailable; sending the call anyway", "budget", bu.Name, "unit", unit, "err", err)
					continue
				}
				if !ok {
					h.settle(ctx, nil)
					if b.obs != nil {
						b.obs.BudgetRefused(bu.Name)
					}
					b.r.log.Info("call refused by a budget", "route", route, "target", t.String(), "budget", bu.Name,
						"unit", unit, "remaining", left, "needed", amount)
					return nil, &BudgetError{Target: t.String(), Budget: bu.Name, Period: bu.Period, Unit: unit,
						Remaining: left, Needed: amount, Resets: windowEnd(b.r.now(), bu.Period)}
				}
				h.held = append(h.held, held{budget: bu.Name, unit: unit, key: key, id: id, estimate: amount})
			}
		}
	}
	return h, nil
}

// settleAfter settles the call's reservations with what it spent: an
// answer's usage (a stream's when it is closed); the reservation itself
// when the provider may have done the work without saying how much (an
// invalid answer, a timeout, a call canceled in flight such as a hedge's
// loser, a stream closed before its end, an answer without usage);
// nothing for a call the provider refused or that never reached it.
func (h *hold) settleAfter(ctx context.Context, resp *answer, err error) {
	if h == nil || len(h.held) == 0 {
		return
	}
	if err == nil && resp.stream != nil {
		st := resp.stream
		st.onClose(func() {
			if r := st.Response(); r != nil {
				h.settleUsage(ctx, r.Usage)
			} else {
				h.settle(ctx, &h.est)
			}
		})
		return
	}
	switch class := retry.ClassOf(err); {
	case err == nil:
		h.settleUsage(ctx, resp.Usage)
	case class.Rule().MayBeBilled:
		h.settle(ctx, &h.est)
	default:
		h.settle(ctx, nil)
	}
}

func (h *hold) settleUsage(ctx context.Context, u llmclient.Usage) {
	if u.PromptTokens+u.CompletionTokens <= 0 {
		h.settle(ctx, &h.est) // a provider that reports no usage is charged the most the call could spend
		return
	}
	s := h.spend(u)
	h.settle(ctx, &s)
}

// settle replaces every reservation by s (nil: gives them back) and
// reports the spend, even when the call's context has ended.
func (h *hold) settle(ctx context.Context, s *spend) {
	ctx = context.WithoutCancel(ctx)
	for _, x := range h.held {
		var actual int64
		if s != nil {
			actual = s.tokens
			if x.unit == UnitUSD {
				actual = s.micro
			}
		}
		if err := h.b.ledger.Settle(ctx, x.key, x.id, actual); err != nil {
			h.b.r.log.Warn("budget settle failed; the reservation lapses after its lease", "budget", x.budget, "unit", x.unit,
				"held", x.estimate, "spent", actual, "err", err)
		}
		if h.b.obs != nil && actual > 0 {
			amount := float64(actual)
			if x.unit == UnitUSD {
				amount /= 1e6
			}
			h.b.obs.BudgetSpent(x.budget, x.unit, amount)
		}
	}
	h.held = nil
}

// spend prices a usage: tokens, and micro-units of currency (a price per
// million tokens is a price in micro-units per token), rounded up.
func (h *hold) spend(u llmclient.Usage) spend {
	s := spend{tokens: int64(u.PromptTokens) + int64(u.CompletionTokens)}
	if h.priced {
		s.micro = int64(math.Ceil(float64(u.PromptTokens)*h.price.PromptPerMTok + float64(u.CompletionTokens)*h.price.CompletionPerMTok))
	}
	return s
}

// requestBytes is what a request sends the model to read: the system
// prompt, the messages (tool calls' arguments too), the tools offered and
// the output schema.
func requestBytes(req llmclient.Request) int {
	n := inputLen(req)
	for _, m := range req.Messages {
		for _, c := range m.ToolCalls {
			n += len(c.Name) + len(c.Arguments)
		}
	}
	for _, t := range req.Tools {
		b, _ := json.Marshal(t)
		n += len(b)
	}
	if req.Output != nil && req.Output.Schema != nil {
		b, _ := json.Marshal(req.Output.Schema)
		n += len(b)
	}
	return n
}

// maxTokens is what a call may write: its MaxTokens, else what the
// adapters send when it is 0.
func maxTokens(req llmclient.Request) int {
	if req.MaxTokens > 0 {
		return req.MaxTokens
	}
	return llmclient.DefaultMaxTokens
}

// windowEnd is when now's window of period ends: windows are period long
// since the Unix epoch, as the ledger counts them.
func windowEnd(now time.Time, period time.Duration) time.Time {
	ms, p := now.UnixMilli(), max(period.Milliseconds(), 1)
	return time.UnixMilli(ms - ms%p + p)
}
