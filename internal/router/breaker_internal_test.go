package router

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentq/agentq/llmclient"

	"github.com/sony/gobreaker/v2"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/retry"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

var testBreaker = breaker.Config{ConsecutiveFailures: 3, ErrorRate: 0.5, MinCalls: 10, Window: 10 * time.Second,
	Cooldown: time.Minute, CooldownJitter: 0.2, ProbeTimeout: time.Minute}

// Three workers (three Breakers on one Redis) and 200 concurrent callers
// after the cooldown: exactly one gets the half-open probe.
func TestExactlyOneHalfOpenProbeAcrossWorkers(t *testing.T) {
	_, rdb := redistest.New(t)
	ctx := context.Background()
	now := time.Now()
	clock := func() time.Time { return now }
	shared := store.NewBreakers(rdb)
	var workers []*Breakers
	for i := 0; i < 3; i++ {
		workers = append(workers, NewBreakers(shared, testBreaker, clock, func() float64 { return 0.5 }, nil))
	}
	// worker 0 sees three failures: open for everyone
	for i := 0; i < 3; i++ {
		workers[0].Record(ctx, "p", "m", retry.Server, false)
	}
	for _, w := range workers {
		if err := w.Refresh(ctx, []string{"p"}); err != nil {
			t.Fatal(err)
		}
		if ok, _ := w.Allow(ctx, "p", "m"); ok {
			t.Fatal("an open breaker let a call through")
		}
	}
	now = now.Add(time.Minute) // the cooldown is over
	var probes, passes atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func(w *Breakers) {
			defer wg.Done()
			ok, probe := w.Allow(ctx, "p", "m")
			if probe {
				probes.Add(1)
			}
			if ok {
				passes.Add(1)
			}
		}(workers[i%3])
	}
	wg.Wait()
	if probes.Load() != 1 || passes.Load() != 1 {
		t.Fatalf("%d probes, %d calls let through; want exactly 1 of each", probes.Load(), passes.Load())
	}
	// the probe succeeds: closed for everyone
	workers[1].Record(ctx, "p", "m", retry.OK, true)
	for _, w := range workers {
		_ = w.Refresh(ctx, []string{"p"})
		if ok, probe := w.Allow(ctx, "p", "m"); !ok || probe {
			t.Fatalf("after a good probe: ok=%v probe=%v", ok, probe)
		}
	}
}

func TestKeyLevelAndCanceledCallsDoNotCount(t *testing.T) {
	b := NewBreakers(nil, testBreaker, nil, nil, nil)
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		for _, c := range []retry.Class{retry.RateLimited, retry.Quota, retry.Auth, retry.Canceled, retry.NotFound} {
			b.Record(ctx, "p", "m", c, false)
		}
	}
	if br := b.Get("p", "m"); br.State != breaker.Closed || br.Consecutive != 0 {
		t.Fatalf("breaker %+v after calls that are not the provider's fault", br)
	}
	b.Record(ctx, "p", "m", retry.Timeout, false)
	b.Record(ctx, "p", "m", retry.BadRequest, false) // the provider answered: a success for the breaker
	if br := b.Get("p", "m"); br.Consecutive != 0 {
		t.Fatalf("a 400 did not reset the failure streak: %+v", br)
	}
}

// The routing decision with a closed breaker and cached state.
func BenchmarkBreakerAllowClosed(b *testing.B) {
	br := NewBreakers(nil, testBreaker, nil, nil, nil)
	br.Record(context.Background(), "openai", "gpt-4.1", retry.OK, false)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if ok, _ := br.Allow(ctx, "openai", "gpt-4.1"); !ok {
			b.Fatal("closed breaker denied")
		}
	}
}

// The whole routing decision for one target on the common path: its
// breaker (closed, cached) and the first usable of its two keys.
func BenchmarkRoutingDecision(b *testing.B) {
	br := NewBreakers(nil, testBreaker, nil, nil, nil)
	keys := NewKeyPools(nil, nil, nil)
	ctx := context.Background()
	ids := []string{llmclient.KeyID("k1"), llmclient.KeyID("k2")}
	keys.Cool(ctx, "openai", ids[0], time.Now().Add(time.Hour)) // the primary cools: the pick moves on
	b.ReportAllocs()
	for b.Loop() {
		ok, _ := br.Allow(ctx, "openai", "gpt-4.1")
		if pick := firstUsable(keys, ids); !ok || pick != 1 {
			b.Fatal("wrong decision")
		}
	}
}

// Picking a key: the first of three is disabled, the second cooling, the
// third usable.
func BenchmarkKeyPick(b *testing.B) {
	keys := NewKeyPools(nil, nil, nil)
	ctx := context.Background()
	ids := []string{llmclient.KeyID("k1"), llmclient.KeyID("k2"), llmclient.KeyID("k3")}
	keys.Disable(ctx, "openai", ids[0], "auth")
	keys.Cool(ctx, "openai", ids[1], time.Now().Add(time.Hour))
	b.ReportAllocs()
	for b.Loop() {
		if firstUsable(keys, ids) != 2 {
			b.Fatal("wrong key")
		}
	}
}

// firstUsable is the router's key pick: the first key neither cooling
// nor disabled, or -1.
func firstUsable(keys *KeyPools, ids []string) int {
	now := time.Now()
	for i, id := range ids {
		if usable, _, _ := keys.check("openai", id, now); usable {
			return i
		}
	}
	return -1
}

// sony/gobreaker's Execute around a no-op, in the same run, for scale.
func BenchmarkGobreakerExecute(b *testing.B) {
	cb := gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{Name: "x"})
	fn := func() (struct{}, error) { return struct{}{}, nil }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cb.Execute(fn); err != nil {
			b.Fatal(err)
		}
	}
}
