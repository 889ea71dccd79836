package router

import (
	"context"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/agentq/agentq/llmclient"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/retry"
)

type nameOnly string

func (n nameOnly) Name() string { return string(n) }
func (nameOnly) Chat(context.Context, llmclient.Request) (*llmclient.Response, error) {
	return nil, nil
}
func (nameOnly) ChatStream(context.Context, llmclient.Request) (*llmclient.Stream, error) {
	return nil, nil
}

func TestHealthScore(t *testing.T) {
	c := HealthConfig{Weights: HealthWeights{Success: 0.4, Latency: 0.3, Trend: 0.3}, LatencyRef: 2 * time.Second}
	cases := []struct {
		name string
		st   targetStats
		want float64
	}{
		{"no calls", targetStats{}, 1},
		// all ok, p95 in the ≤ 16ms bin: 0.4 + 0.3 × 2/2.016 + 0.3
		{"healthy", targetStats{calls: [2]int64{50, 50}, bins: [44]int64{0, 0, 100}}, 0.4 + 0.3*2/2.016 + 0.3},
		// half fail, getting worse (0 → 100% errors): 0.4 × 0.5 + latency + 0.3 × 0
		{"failing more", targetStats{calls: [2]int64{50, 50}, fails: [2]int64{0, 50}, bins: [44]int64{0, 0, 50}}, 0.2 + 0.3*2/2.016},
		// failing less: no trend penalty
		{"recovering", targetStats{calls: [2]int64{50, 50}, fails: [2]int64{50, 0}, bins: [44]int64{0, 0, 50}}, 0.2 + 0.3*2/2.016 + 0.3},
		// everything failed: no latency evidence either
		{"dead", targetStats{calls: [2]int64{10, 10}, fails: [2]int64{10, 10}}, 0.3},
	}
	for _, tc := range cases {
		if got := tc.st.score(c); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: score %.4f, want %.4f", tc.name, got, tc.want)
		}
	}
	slow := targetStats{calls: [2]int64{0, 20}}
	slow.bins[30] = 20 // the bin up to 10ms × 1.25³⁰
	if p := slow.p95(); p != time.Duration(latencyBins[30])*time.Millisecond || p < 8*time.Second || p > 9*time.Second {
		t.Errorf("p95 %s", p)
	}
}

func TestHealthOrder(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	h := mustHealth(t, nil, HealthConfig{Window: 10 * time.Second, Weights: DefaultHealthConfig().Weights}, func() time.Time { return now }, nil)
	targets := []Target{{Provider: nameOnly("a"), Model: "m"}, {Provider: nameOnly("b"), Model: "m"}, {Provider: nameOnly("c"), Model: "m"}}
	// a fails half its calls; b and c are healthy and fast
	for i := 0; i < 20; i++ {
		h.observe("a", "m", retry.OK, 100*time.Millisecond)
		h.observe("a", "m", retry.Server, time.Second)
		h.observe("b", "m", retry.OK, 100*time.Millisecond)
		h.observe("c", "m", retry.OK, 100*time.Millisecond)
		h.observe("c", "m", retry.RateLimited, 0) // not the target's fault: not counted
	}
	if err := h.Sync(context.Background(), []string{"a", "b", "c"}); err != nil {
		t.Fatal(err)
	}
	if h.Score("a", "m") >= h.Score("b", "m") || h.Score("b", "m") != h.Score("c", "m") {
		t.Fatalf("scores a=%.3f b=%.3f c=%.3f", h.Score("a", "m"), h.Score("b", "m"), h.Score("c", "m"))
	}
	firsts := map[int]int{}
	for k := 0; k < 1000; k++ {
		r := (float64(k) + 0.5) / 1000
		o := h.order(targets, "health", func() float64 { return r }, nil)
		firsts[o[0]]++
		if o[0] != 0 && o[2] != 0 {
			t.Fatalf("random %v: order %v, want the failing target last unless picked first", r, o)
		}
	}
	// scores 0.786 (a) and 0.986 (b, c): weights 0.381, 0.944, 0.944
	if firsts[1] != firsts[2] || firsts[0] < 150 || firsts[0] > 190 {
		t.Fatalf("first picks %v: want b and c even and a about 17%%", firsts)
	}
	if o := h.order(targets, "ordered", func() float64 { return 0.9 }, nil); o[0] != 0 || o[1] != 1 || o[2] != 2 {
		t.Fatalf("ordered: %v", o)
	}
	// the window slides: old failures age out and a's score returns
	now = now.Add(11 * time.Second)
	h.observe("a", "m", retry.OK, 100*time.Millisecond)
	_ = h.Sync(context.Background(), []string{"a", "b", "c"})
	if a := h.Score("a", "m"); a < 0.95 {
		t.Fatalf("after the window a still scores %.3f", a)
	}
}

// Two workers' counts meet in Redis: each scores from both.
func TestHealthSharedThroughRedis(t *testing.T) {
	_, rdb := redistest.New(t)
	shared := healthStoreAdapter{store.NewHealthStats(rdb)}
	now := time.Now()
	clock := func() time.Time { return now }
	w1 := mustHealth(t, shared, HealthConfig{Window: 10 * time.Second, Weights: DefaultHealthConfig().Weights}, clock, nil)
	w2 := mustHealth(t, shared, HealthConfig{Window: 10 * time.Second, Weights: DefaultHealthConfig().Weights}, clock, nil)
	for i := 0; i < 10; i++ {
		w1.observe("p", "m", retry.Server, time.Second)
	}
	w2.observe("p", "m", retry.OK, 100*time.Millisecond)
	ctx := context.Background()
	if err := w1.Sync(ctx, []string{"p"}); err != nil {
		t.Fatal(err)
	}
	if err := w2.Sync(ctx, []string{"p"}); err != nil {
		t.Fatal(err)
	}
	// 1 success of 11 calls, seen by the worker that made only the success
	if s := w2.Score("p", "m"); s > 0.4*(1.0/11)+0.3+0.3+1e-9 || s < 0.3 {
		t.Fatalf("worker 2 scores %.3f: it does not see worker 1's failures", s)
	}
}

type healthStoreAdapter struct{ *store.HealthStats }

func (h healthStoreAdapter) Add(ctx context.Context, batches []HealthBatch, ttl time.Duration) error {
	adds := make([]store.HealthAdd, len(batches))
	for i, b := range batches {
		adds[i] = store.HealthAdd{Provider: b.Provider, Bucket: b.Bucket, Models: b.Models}
	}
	return h.HealthStats.Add(ctx, adds, ttl)
}

// An invalid answer counts against the target's health (quality), while
// key problems and cancellations do not.
func TestInvalidOutputLowersHealth(t *testing.T) {
	h := mustHealth(t, nil, HealthConfig{Window: time.Minute, Weights: HealthWeights{Success: 0.4, Latency: 0.3, Trend: 0.3}}, nil, nil)
	for i := 0; i < 10; i++ {
		h.observe("p", "good", retry.OK, 10*time.Millisecond)
		h.observe("p", "sloppy", retry.OK, 10*time.Millisecond)
		h.observe("p", "sloppy", retry.InvalidOutput, 10*time.Millisecond)
		h.observe("p", "keyless", retry.OK, 10*time.Millisecond)
		h.observe("p", "keyless", retry.RateLimited, 10*time.Millisecond)
	}
	if err := h.Sync(context.Background(), []string{"p"}); err != nil {
		t.Fatal(err)
	}
	good, sloppy, keyless := h.Score("p", "good"), h.Score("p", "sloppy"), h.Score("p", "keyless")
	if !(sloppy < good) || keyless != good {
		t.Fatalf("scores: good %.3f, sloppy %.3f (want lower), keyless %.3f (want = good)", good, sloppy, keyless)
	}
}

// mustHealth is NewHealth, its error failing the test.
func mustHealth(t *testing.T, store HealthStore, cfg HealthConfig, now func() time.Time, log *slog.Logger) *Health {
	t.Helper()
	h, err := NewHealth(store, cfg, now, log)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
