package router

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/retry"
)

// BreakerStore shares breakers between workers by compare-and-set.
type BreakerStore interface {
	CAS(ctx context.Context, provider, model string, old int64, next breaker.Breaker) (bool, breaker.Breaker, error)
	Load(ctx context.Context, providers []string) (map[string]map[string]breaker.Breaker, error)
}

// Breakers holds one circuit breaker per target (provider + model). The
// routing decision reads a local copy (no Redis round trip); transitions
// (a failure, a probe taken, a close) are compare-and-set in the shared
// store, and Refresh brings in the other workers' transitions (every
// second, and at once on their announcement).
type Breakers struct {
	store  BreakerStore // nil: this process only
	cfg    breaker.Config
	now    func() time.Time
	random func() float64
	log    *slog.Logger

	mu      sync.RWMutex
	state   map[string]map[string]breaker.Breaker
	windows map[string]map[string]*window
}

// NewBreakers returns breakers with cfg, shared through store (nil: local).
// now and random may be nil.
func NewBreakers(store BreakerStore, cfg breaker.Config, now func() time.Time, random func() float64, log *slog.Logger) *Breakers {
	if now == nil {
		now = time.Now
	}
	if random == nil {
		random = rand.Float64
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Breakers{store: store, cfg: cfg, now: now, random: random, log: log,
		state: map[string]map[string]breaker.Breaker{}, windows: map[string]map[string]*window{}}
}

// Get returns the locally known breaker of a target.
func (b *Breakers) Get(provider, model string) breaker.Breaker {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.state[provider][model]
}

// Allow is the routing decision: may a call go to this target, and is it
// the half-open probe? Only a probe makes a round trip (to take the slot).
// provider and model name any target the workers share a breaker for (an
// MCP server's is config.MCPBreaker's name, with no model).
func (b *Breakers) Allow(ctx context.Context, provider, model string) (ok, probe bool) {
	now := b.now()
	b.mu.RLock()
	br := b.state[provider][model]
	b.mu.RUnlock()
	switch br.Allow(now) {
	case breaker.Pass:
		return true, false
	case breaker.Deny:
		return false, false
	}
	// take the one probe slot, cluster-wide
	took, _ := b.apply(ctx, provider, model, func(cur breaker.Breaker) breaker.Breaker {
		if cur.Allow(now) != breaker.Probe {
			return cur
		}
		return cur.StartProbe(now, b.cfg)
	}, func(cur breaker.Breaker) bool {
		return cur.State == breaker.HalfOpen && cur.ProbeUntil.Equal(now.Add(b.cfg.ProbeTimeout))
	})
	return took, took
}

// admit lets a call to the target through its breaker: ok, or as its
// half-open probe; an open breaker skips the target (class server) until
// its cooldown ends.
func (b *Breakers) admit(ctx context.Context, t Target) (probe bool, err error) {
	ok, probe := b.Allow(ctx, t.Provider.Name(), t.Model)
	if !ok {
		return false, &SkippedError{Target: t.String(), Reason: SkipBreakerOpen, Until: b.Get(t.Provider.Name(), t.Model).OpenUntil, class: retry.Server}
	}
	return probe, nil
}

// Record feeds a call's outcome to the target's breaker. Only failures of
// the provider's own (network, timeout, server) count against it; a
// request the provider answered (even with a 4xx) counts for it; key-level
// and canceled calls are not counted at all. probe says the call was the
// half-open probe: one that ends without a verdict gives its slot back.
func (b *Breakers) Record(ctx context.Context, provider, model string, class retry.Class, probe bool) {
	now := b.now()
	switch {
	case class.Rule().Answered:
		b.count(provider, model, now, false)
		b.apply(ctx, provider, model, func(cur breaker.Breaker) breaker.Breaker { return cur.OnSuccess() }, nil)
	case class.ProviderFault():
		w := b.count(provider, model, now, true)
		b.apply(ctx, provider, model, func(cur breaker.Breaker) breaker.Breaker { return cur.OnFailure(now, b.cfg, w, b.random) }, nil)
	case probe:
		b.apply(ctx, provider, model, func(cur breaker.Breaker) breaker.Breaker {
			if cur.State != breaker.HalfOpen {
				return cur
			}
			return breaker.Breaker{State: breaker.Open, OpenUntil: now, Version: cur.Version + 1}
		}, nil)
	}
}

// apply changes a target's breaker with f, by compare-and-set against the
// shared store, retrying on conflicts with the stored value. It returns
// whether f's change (as judged by won, or any change if won is nil) was
// the one stored.
func (b *Breakers) apply(ctx context.Context, provider, model string, f func(breaker.Breaker) breaker.Breaker, won func(breaker.Breaker) bool) (bool, breaker.Breaker) {
	b.mu.RLock()
	cur := b.state[provider][model]
	b.mu.RUnlock()
	for try := 0; try < 8; try++ {
		next := f(cur)
		if next == cur {
			return false, cur
		}
		if b.store == nil {
			b.mu.Lock()
			stored := b.state[provider][model]
			ok := stored.Version == cur.Version
			if ok {
				b.setLocked(provider, model, next)
			} else {
				cur = stored
			}
			b.mu.Unlock()
			if ok {
				return won == nil || won(next), next
			}
			continue
		}
		ok, stored, err := b.store.CAS(ctx, provider, model, cur.Version, next)
		if err != nil {
			b.log.Warn("could not share a breaker change; acting on it locally", "provider", provider, "model", model, "err", err)
			b.set(provider, model, next)
			return won == nil || won(next), next
		}
		if ok {
			b.set(provider, model, next)
			if next.State != cur.State {
				b.log.Info("breaker "+next.State.String(), "provider", provider, "model", model, "from", cur.State.String())
			}
			return won == nil || won(next), next
		}
		b.set(provider, model, stored)
		cur = stored
	}
	return false, cur
}

func (b *Breakers) set(provider, model string, br breaker.Breaker) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.setLocked(provider, model, br)
}

func (b *Breakers) setLocked(provider, model string, br breaker.Breaker) {
	if b.state[provider] == nil {
		b.state[provider] = map[string]breaker.Breaker{}
	}
	// never go back to an older version than we know
	if cur, ok := b.state[provider][model]; ok && cur.Version > br.Version {
		return
	}
	b.state[provider][model] = br
}

// count adds a call to the target's local error-rate window and returns
// the window's totals.
func (b *Breakers) count(provider, model string, now time.Time, failed bool) breaker.Window {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.windows[provider] == nil {
		b.windows[provider] = map[string]*window{}
	}
	w := b.windows[provider][model]
	if w == nil {
		w = newWindow(b.cfg.Window, 10)
		b.windows[provider][model] = w
	}
	return w.add(now, failed)
}

// Refresh replaces the local copy with the shared breakers of providers.
func (b *Breakers) Refresh(ctx context.Context, providers []string) error {
	if b.store == nil {
		return nil
	}
	st, err := b.store.Load(ctx, providers)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range providers {
		next := map[string]breaker.Breaker{}
		for m, br := range st[p] {
			next[m] = br
		}
		b.state[p] = next
	}
	return nil
}

// Run refreshes every interval and whenever poke receives, until ctx ends.
func (b *Breakers) Run(ctx context.Context, providers []string, interval time.Duration, poke <-chan struct{}) {
	runRefresh(ctx, interval, poke, func() error { return b.Refresh(ctx, providers) }, b.log, "breaker")
}

func runRefresh(ctx context.Context, interval time.Duration, poke <-chan struct{}, refresh func() error, log *slog.Logger, what string) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := refresh(); err != nil && ctx.Err() == nil {
			log.Warn(what+" state refresh failed; using the last known state", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-poke:
		}
	}
}

// window counts calls and failures in buckets over a sliding span.
type window struct {
	span     time.Duration
	bucket   time.Duration
	starts   []int64 // bucket start (unix nanos) per slot
	calls    []int
	failures []int
}

func newWindow(span time.Duration, buckets int) *window {
	return &window{span: span, bucket: span / time.Duration(buckets), starts: make([]int64, buckets),
		calls: make([]int, buckets), failures: make([]int, buckets)}
}

func (w *window) add(now time.Time, failed bool) breaker.Window {
	n := now.UnixNano()
	start := n - n%int64(w.bucket)
	i := int(start/int64(w.bucket)) % len(w.calls)
	if w.starts[i] != start {
		w.starts[i], w.calls[i], w.failures[i] = start, 0, 0
	}
	w.calls[i]++
	if failed {
		w.failures[i]++
	}
	var out breaker.Window
	for j := range w.calls {
		if n-w.starts[j] < int64(w.span) {
			out.Calls += w.calls[j]
			out.Failures += w.failures[j]
		}
	}
	return out
}
