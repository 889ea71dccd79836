package router

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/agentq/agentq/internal/defaults"
	"github.com/agentq/agentq/retry"
)

// HealthBatch is one worker's counts for one provider's time bucket.
type HealthBatch struct {
	Provider string
	Bucket   int64                       // bucket start, unix seconds
	Models   map[string]map[string]int64 // model -> counter -> count
}

// HealthStore aggregates every worker's counts.
type HealthStore interface {
	Add(ctx context.Context, batches []HealthBatch, ttl time.Duration) error
	Load(ctx context.Context, providers []string, buckets []int64) (map[string]map[int64]map[string]map[string]int64, error)
}

// HealthWeights weigh a score's parts; they sum to 1.
type HealthWeights struct{ Success, Latency, Trend float64 }

// HealthConfig tunes scoring. Window is split in ten buckets (at least 1s).
type HealthConfig struct {
	Window  time.Duration
	Weights HealthWeights
	// LatencyRef is the p95 that scores 0.5 on latency; 0 means 2s.
	LatencyRef time.Duration
}

// latencyBins are the upper bounds (ms) of the latency histogram, 25%
// apart from 10ms to about 2 minutes; the last bin is open.
var latencyBins = func() [43]int64 {
	var b [43]int64
	x := 10.0
	for i := range b {
		b[i] = int64(math.Round(x))
		x *= 1.25
	}
	return b
}()

var binNames = func() []string {
	out := make([]string, len(latencyBins)+1)
	for i := range out {
		out[i] = "l" + strconv.Itoa(i)
	}
	return out
}()

// Health scores targets from the calls of every worker: success rate,
// p95 latency and error-rate trend over a sliding window.
// Calls are counted locally, added to the shared store once a second, and
// scores are recomputed from the store's window on the same beat, so the
// call path only reads a cached score.
type Health struct {
	store HealthStore // nil: this process only
	cfg   HealthConfig
	now   func() time.Time
	log   *slog.Logger

	mu      sync.Mutex
	pending map[string]map[int64]map[string]map[string]int64 // provider -> bucket -> model -> counter
	local   map[string]map[int64]map[string]map[string]int64 // kept for scoring without a store
	scores  map[string]map[string]float64
	pcts    map[string]map[string][2]time.Duration // p95, p99 of successful calls
	loaded  time.Time                              // the last load of the shared windows
}

// QuietSync is how often a scorer with nothing of its own to add (no
// calls since its last sync) loads the shared windows: an idle worker
// reads a provider's window buckets this often instead of every sync,
// and reads them at its first sync after a call.
const QuietSync = 10 * time.Second

// DefaultHealthConfig is the built-in scoring (internal/defaults), for a
// scorer built without a configuration.
func DefaultHealthConfig() HealthConfig {
	return HealthConfig{Window: defaults.HealthWindow,
		Weights: HealthWeights{Success: defaults.HealthSuccessWeight, Latency: defaults.HealthLatencyWeight, Trend: defaults.HealthTrendWeight}}
}

// NewHealth returns a scorer; store, now and log may be nil. cfg is taken
// as given (the configuration's resilience.health): a window that is not
// positive, or no weights, is refused.
func NewHealth(store HealthStore, cfg HealthConfig, now func() time.Time, log *slog.Logger) (*Health, error) {
	if cfg.Window <= 0 || cfg.Weights == (HealthWeights{}) {
		return nil, fmt.Errorf("router: health window %s and weights %+v must be set (the configuration's resilience.health)", cfg.Window, cfg.Weights)
	}
	if cfg.LatencyRef <= 0 {
		cfg.LatencyRef = 2 * time.Second
	}
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Health{store: store, cfg: cfg, now: now, log: log,
		pending: map[string]map[int64]map[string]map[string]int64{},
		local:   map[string]map[int64]map[string]map[string]int64{},
		scores:  map[string]map[string]float64{}}, nil
}

func (h *Health) bucketSpan() time.Duration { return max(h.cfg.Window/10, time.Second) }

func (h *Health) bucketOf(t time.Time) int64 {
	span := int64(h.bucketSpan() / time.Second)
	s := t.Unix()
	return s - s%span
}

// observe counts a call: successes (with their latency) and the provider's
// own failures; other outcomes say nothing about the target's health.
func (h *Health) observe(provider, model string, class retry.Class, dur time.Duration) {
	var name string
	switch {
	case class == retry.OK:
		name = binNames[latencyBin(dur)]
	case class.Rule().LowersHealth: // the target's own faults, and bad answers
		name = "fail"
	default:
		return
	}
	b := h.bucketOf(h.now())
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.pending
	if h.store == nil {
		m = h.local
	}
	add(m, provider, b, model, "calls", 1)
	add(m, provider, b, model, name, 1)
}

func add(m map[string]map[int64]map[string]map[string]int64, p string, b int64, model, name string, n int64) {
	if m[p] == nil {
		m[p] = map[int64]map[string]map[string]int64{}
	}
	if m[p][b] == nil {
		m[p][b] = map[string]map[string]int64{}
	}
	if m[p][b][model] == nil {
		m[p][b][model] = map[string]int64{}
	}
	m[p][b][model][name] += n
}

func latencyBin(d time.Duration) int {
	ms := d.Milliseconds()
	for i, ub := range latencyBins {
		if ms <= ub {
			return i
		}
	}
	return len(latencyBins)
}

// Score is a target's last computed score in [0, 1]; a target with no
// calls in the window scores 1.
func (h *Health) Score(provider, model string) float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s, ok := h.scores[provider][model]; ok {
		return s
	}
	return 1
}

// Latency returns a target's p95 (q < 0.99) or p99 latency over the
// window, and false without successful calls to tell.
func (h *Health) Latency(provider, model string, q float64) (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.pcts[provider][model]
	i := 0
	if q >= 0.99 {
		i = 1
	}
	if !ok || p[i] < 0 {
		return 0, false
	}
	return p[i], true
}

// Sync adds this worker's counts to the store and recomputes the scores of
// providers from the window.
func (h *Health) Sync(ctx context.Context, providers []string) error {
	now := h.now()
	h.mu.Lock()
	pending := h.pending
	h.pending = map[string]map[int64]map[string]map[string]int64{}
	h.mu.Unlock()
	var window map[string]map[int64]map[string]map[string]int64
	buckets := h.windowBuckets(now)
	h.mu.Lock()
	quiet := len(pending) == 0 && !h.loaded.IsZero() && now.Sub(h.loaded) < QuietSync
	h.mu.Unlock()
	if h.store != nil && quiet {
		return nil
	}
	if h.store != nil {
		var batches []HealthBatch
		for p, bs := range pending {
			for b, models := range bs {
				batches = append(batches, HealthBatch{Provider: p, Bucket: b, Models: models})
			}
		}
		if err := h.store.Add(ctx, batches, h.cfg.Window+2*h.bucketSpan()); err != nil {
			h.mu.Lock()
			mergeInto(h.pending, pending) // try again on the next beat
			h.mu.Unlock()
			return err
		}
		var err error
		if window, err = h.store.Load(ctx, providers, buckets); err != nil {
			return err
		}
		h.mu.Lock()
		h.loaded = now
		h.mu.Unlock()
	} else {
		h.mu.Lock()
		window = copyWindow(h.local, buckets)
		h.mu.Unlock()
	}
	scores := map[string]map[string]float64{}
	pcts := map[string]map[string][2]time.Duration{}
	for _, p := range providers {
		scores[p] = map[string]float64{}
		pcts[p] = map[string][2]time.Duration{}
		for model, st := range aggregate(window[p], buckets) {
			scores[p][model] = st.score(h.cfg)
			pcts[p][model] = [2]time.Duration{st.percentile(0.95), st.percentile(0.99)}
		}
	}
	h.mu.Lock()
	h.scores = scores
	h.pcts = pcts
	if h.store == nil {
		pruneOld(h.local, buckets[0])
	}
	h.mu.Unlock()
	return nil
}

func (h *Health) windowBuckets(now time.Time) []int64 {
	span := int64(h.bucketSpan() / time.Second)
	last := h.bucketOf(now)
	n := int64(h.cfg.Window/time.Second) / span
	out := make([]int64, 0, n)
	for b := last - (n-1)*span; b <= last; b += span {
		out = append(out, b)
	}
	return out
}

// Run syncs every interval until ctx ends.
func (h *Health) Run(ctx context.Context, providers []string, interval time.Duration) {
	runRefresh(ctx, interval, nil, func() error { return h.Sync(ctx, providers) }, h.log, "health")
}

// order returns the order in which to try targets: "ordered" keeps the
// configured order; "health" picks the first at random, weighted by
// score⁴ (at least minWeight), and puts the rest best-scoring first. Close
// scores share the traffic almost evenly; a weak target still gets a few
// percent, so a recovering target is tried, its score climbs as its
// successes fill the window, and its share returns gradually.
func (h *Health) order(targets []Target, strategy string, random func() float64, out []int) []int {
	out = out[:0]
	for i := range targets {
		out = append(out, i)
	}
	if strategy == "ordered" || len(targets) < 2 {
		return out
	}
	var scores [16]float64
	w := scores[:0]
	if len(targets) > len(scores) {
		w = make([]float64, 0, len(targets))
	}
	for _, t := range targets {
		w = append(w, h.Score(t.Provider.Name(), t.Model))
	}
	// insertion sort, best first, stable: no allocation for a few targets
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && w[out[j]] > w[out[j-1]]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	sum := 0.0
	for i, s := range w {
		w[i] = max(s*s*s*s, minWeight)
		sum += w[i]
	}
	if sum <= 0 {
		return out
	}
	x := random() * sum
	for j, i := range out {
		x -= w[i]
		if x < 0 {
			copy(out[1:j+1], out[:j]) // the pick goes first, the others keep their order
			out[0] = i
			break
		}
	}
	return out
}
