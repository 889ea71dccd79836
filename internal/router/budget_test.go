package router_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
)

// gate holds every request that reaches it until opened: calls that were
// admitted wait there while the test counts them.
type gate struct {
	in   atomic.Int64
	open chan struct{}
}

func (g *gate) RoundTrip(req *http.Request) (*http.Response, error) {
	g.in.Add(1)
	select {
	case <-g.open:
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	return http.DefaultTransport.RoundTrip(req)
}

// budgetObserver counts what the router tells the metrics.
type budgetObserver struct {
	mu      sync.Mutex
	spent   map[string]float64 // "budget unit"
	refused map[string]int
}

func (o *budgetObserver) BudgetSpent(budget, unit string, amount float64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.spent[budget+" "+unit] += amount
}

func (o *budgetObserver) BudgetRefused(budget string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refused[budget]++
}

type budgetFixture struct {
	srv    *chaosllm.Server
	url    string // chaosllm's
	oa, an llmclient.Provider
	ledger *store.Budgets
	obs    *budgetObserver
	now    time.Time
	mu     sync.Mutex
}

func newBudgetFixture(t *testing.T, transport http.RoundTripper) *budgetFixture {
	t.Helper()
	srv, err := chaosllm.New(chaosllm.Scenario{Keys: []string{goodKey}}, chaosllm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	f := &budgetFixture{srv: srv, url: hs.URL, obs: &budgetObserver{spent: map[string]float64{}, refused: map[string]int{}}, now: time.Now()}
	if f.oa, err = llmclient.NewProvider("openai", llmclient.Options{Name: "oa", BaseURL: hs.URL + "/v1", Keys: []string{goodKey}, Transport: transport}); err != nil {
		t.Fatal(err)
	}
	if f.an, err = llmclient.NewProvider("anthropic", llmclient.Options{Name: "an", BaseURL: hs.URL, Keys: []string{goodKey}, Transport: transport}); err != nil {
		t.Fatal(err)
	}
	_, rdb := redistest.New(t)
	f.ledger = store.NewBudgets(rdb, store.BudgetOptions{Now: f.clock, Lease: 10 * time.Minute})
	return f
}

func (f *budgetFixture) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *budgetFixture) router(t *testing.T, budgets []router.Budget, targets ...llmclient.Provider) *router.Router {
	t.Helper()
	var ts []router.Target
	for _, p := range targets {
		ts = append(ts, router.Target{Provider: p, Model: "m-" + p.Name(), Timeout: 10 * time.Second})
	}
	r, err := router.NewRouter([]router.Route{{Name: "r", Strategy: "ordered", Targets: ts}}, routerOptions(router.RouterOptions{
		Budgets: router.Budgets{List: budgets, Ledger: f.ledger, Observer: f.obs,
			Prices: map[string]router.Price{"oa/m-oa": {PromptPerMTok: 2, CompletionPerMTok: 8}}}}))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ask100 is a request the router reserves 100 tokens for: a 40-byte
// prompt (10 tokens at 4 bytes each) and max_tokens 90.
func ask100(i int) llmclient.Request {
	p := strings.Repeat("x", 36) + string(rune('a'+i%26)) + "?!."
	return llmclient.Request{MaxTokens: 90, Messages: []llmclient.Message{{Role: "user", Content: p}}}
}

// Twenty calls at once against a route budget of ten calls' worth: ten
// reach the provider, ten fail budget_exceeded naming the budget, its
// period and what is left, without a call.
func TestBudgetAdmitsTenOfTwentyConcurrentCalls(t *testing.T) {
	g := &gate{open: make(chan struct{})}
	f := newBudgetFixture(t, g)
	r := f.router(t, []router.Budget{{Name: "ten", Route: "r", Period: time.Hour, Tokens: 1000}}, f.oa)
	var (
		wg      sync.WaitGroup
		refused atomic.Int64
		errs    = make([]error, 20)
	)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = r.Chat(context.Background(), "r", ask100(i))
			if retry.ClassOf(errs[i]) == retry.BudgetExceeded {
				refused.Add(1)
			}
		}()
	}
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return g.in.Load()+refused.Load() == 20, "calls at the provider and refusals do not add up to 20"
	})
	close(g.open)
	wg.Wait()
	if got := f.srv.Snapshot().Total; got != 10 {
		t.Fatalf("chaosllm saw %d calls, want 10", got)
	}
	for _, err := range errs {
		var be *router.BudgetError
		switch {
		case err == nil:
		case errors.As(err, &be):
			if be.Budget != "ten" || be.Remaining != 0 || be.Needed != 100 || !strings.Contains(err.Error(), "budget ten (1h) has 0 tokens left, the call needs up to 100") {
				t.Errorf("refusal: %v", err)
			}
		default:
			t.Errorf("a call failed otherwise: %v", err)
		}
	}
	if refused.Load() != 10 || f.obs.refused["ten"] != 10 {
		t.Fatalf("%d refusals, %d observed; want 10", refused.Load(), f.obs.refused["ten"])
	}
}

// A call that spent less than it reserved gives the rest back: the next
// call fits, and the budget counts the provider's usage exactly (a stream
// counts when it is closed).
func TestBudgetSettleRefundsTheUnusedReservation(t *testing.T) {
	f := newBudgetFixture(t, nil)
	r := f.router(t, []router.Budget{{Name: "b", Route: "r", Period: time.Hour, Tokens: 150, MicroUSD: 10_000}}, f.oa)
	ctx := context.Background()
	first, err := r.Chat(ctx, "r", ask100(0))
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.ChatStream(ctx, "r", ask100(1)) // 100 more fit only if the first gave back what it did not use
	if err != nil {
		t.Fatalf("second call after a refund: %v", err)
	}
	second, err := st.Collect()
	if err != nil {
		t.Fatal(err)
	}
	want := int64(first.Usage.PromptTokens + first.Usage.CompletionTokens + second.Usage.PromptTokens + second.Usage.CompletionTokens)
	used, held, err := f.ledger.Spent(ctx, "cfg:b:tokens", time.Hour)
	if err != nil || used != want || held != 0 || want == 0 {
		t.Fatalf("budget used %d held %d (err %v), want the usage %d and nothing held", used, held, err, want)
	}
	micro, _, _ := f.ledger.Spent(ctx, "cfg:b:usd", time.Hour)
	if p := first.Usage.PromptTokens + second.Usage.PromptTokens; micro != int64(2*p+8*(int(want)-p)) {
		t.Fatalf("usd used %d micro, want %d", micro, 2*p+8*(int(want)-p))
	}
	if f.obs.spent["b tokens"] != float64(want) || f.obs.spent["b usd"] != float64(micro)/1e6 {
		t.Fatalf("observed spend %v", f.obs.spent)
	}
}

// A reservation never settled (its worker crashed) holds the budget only
// for its lease.
func TestBudgetUnsettledReservationLapses(t *testing.T) {
	f := newBudgetFixture(t, nil)
	r := f.router(t, []router.Budget{{Name: "b", Route: "r", Period: 24 * time.Hour, Tokens: 1000}}, f.oa)
	ctx := context.Background()
	if _, ok, _, err := f.ledger.Reserve(ctx, "cfg:b:tokens", 1000, 950, 24*time.Hour); !ok || err != nil {
		t.Fatalf("the crashed worker's reservation: %v %v", ok, err)
	}
	if _, err := r.Chat(ctx, "r", ask100(0)); retry.ClassOf(err) != retry.BudgetExceeded {
		t.Fatalf("a call while the reservation holds: %v", err)
	}
	f.mu.Lock()
	f.now = f.now.Add(10*time.Minute + time.Second)
	f.mu.Unlock()
	if _, err := r.Chat(ctx, "r", ask100(0)); err != nil {
		t.Fatalf("a call after the lease lapsed: %v", err)
	}
}

// A provider's budget sends the route on to its next target; the refused
// target's breaker and health hear nothing. A route's budget refuses every
// target: the route fails budget_exceeded, which is not retryable.
func TestBudgetRefusalMovesOnAndBlamesNobody(t *testing.T) {
	f := newBudgetFixture(t, nil)
	r := f.router(t, []router.Budget{{Name: "oa-day", Provider: "oa", Period: 24 * time.Hour, Tokens: 50}}, f.oa, f.an)
	ctx := context.Background()
	for i := range 8 {
		resp, err := r.Chat(ctx, "r", ask100(i))
		if err != nil || resp.Provider != "an" {
			t.Fatalf("call %d: %v %+v; want the next target's answer", i, err, resp)
		}
	}
	for _, ts := range r.Targets() {
		if ts.Breaker != breaker.Closed {
			t.Errorf("%s/%s breaker %v after budget refusals", ts.Provider, ts.Model, ts.Breaker)
		}
	}
	if st := f.srv.Snapshot(); st.Total != 8 {
		t.Fatalf("chaosllm saw %d calls, want 8 (all to the second target)", st.Total)
	}
	rr := f.router(t, []router.Budget{{Name: "none-left", Route: "r", Period: time.Hour, Tokens: 10}}, f.oa, f.an)
	_, err := rr.Chat(ctx, "r", ask100(0))
	var re *router.RouteError
	if !errors.As(err, &re) || re.Class() != retry.BudgetExceeded || len(re.Attempts) != 2 || re.Class().Retryable() {
		t.Fatalf("route budget: %v", err)
	}
}

// A context given the same budget twice (its ledger key twice) reserves
// each call once: 100 tokens fit a budget of 150 however often it is
// attached.
func TestBudgetOnTheContextTwiceReservesOnce(t *testing.T) {
	f := newBudgetFixture(t, nil)
	r := f.router(t, nil, f.oa)
	b := router.Budget{Name: "workflow w", Tokens: 150}
	ctx := router.WithBudget(router.WithBudget(context.Background(), b, "wf:w"), b, "wf:w")
	if _, err := r.Chat(ctx, "r", ask100(0)); err != nil {
		t.Fatalf("a 100-token call against 150 tokens, the budget attached twice: %v", err)
	}
}

// A call that reached the provider and ended without an answer (here the
// attempt's deadline) may have been billed: the budget keeps what it
// reserved for it. A call the provider refused (a key it does not accept)
// gives its reservation back.
func TestBudgetKeepsTheReservationOfATimedOutCallOnly(t *testing.T) {
	g := &gate{open: make(chan struct{})} // never opened: every call waits for its deadline
	f := newBudgetFixture(t, g)
	ctx := context.Background()
	r := f.router(t, []router.Budget{{Name: "b", Route: "r", Period: time.Hour, Tokens: 1000}}, f.oa)
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err := r.Chat(cctx, "r", ask100(0))
	cancel()
	if c := retry.ClassOf(err); !c.Rule().MayBeBilled {
		t.Fatalf("a call past its deadline: class %s (%v), want one that may be billed", c, err)
	}
	if used, held, err := f.ledger.Spent(ctx, "cfg:b:tokens", time.Hour); err != nil || used != 100 || held != 0 {
		t.Fatalf("after the timed-out call: used %d held %d (%v), want the 100 reserved kept as spent", used, held, err)
	}

	refused, err := llmclient.NewProvider("openai", llmclient.Options{Name: "oa", BaseURL: f.url + "/v1", Keys: []string{"sk-not-accepted-here"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.router(t, []router.Budget{{Name: "b", Route: "r", Period: time.Hour, Tokens: 1000}}, refused).Chat(ctx, "r", ask100(1))
	if c := retry.ClassOf(err); c != retry.Auth {
		t.Fatalf("a call with a key the provider refuses: class %s (%v), want auth", c, err)
	}
	if used, held, err := f.ledger.Spent(ctx, "cfg:b:tokens", time.Hour); err != nil || used != 100 || held != 0 {
		t.Fatalf("after the refused call: used %d held %d (%v), want its reservation given back (100 used, as before)", used, held, err)
	}
}
