package router_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/retry"
)

// waits records the waits a route's Provider asks for, without waiting.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) wait(_ context.Context, d time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.d = append(w.d, d)
	return nil
}

func soloRouter(t *testing.T, fx fixture) *router.Router {
	t.Helper()
	r, err := router.NewRouter([]router.Route{{Name: "solo", Targets: []router.Target{{Provider: fx.OpenAI, Model: "m", Timeout: 5 * time.Second}}}},
		routerOptions(router.RouterOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A route whose targets all failed is tried again after each backoff, as
// many times as the retries allow; a wait that would outlast the caller's
// deadline is not begun.
func TestARouteProviderTriesAgainAfterTheBackoff(t *testing.T) {
	fx := newFixture(t, chaosllm.Scenario{Phases: []chaosllm.Phase{{Fault: &chaosllm.Fault{Status: 500}}}}, goodKey)
	r := soloRouter(t, fx)
	var w waits
	bo := retry.Backoff{Base: time.Second, Factor: 2, Max: time.Minute, JitterLow: 1, JitterHigh: 1}
	p, err := r.Provider("solo", router.Retries{Max: 2, Backoff: bo, Random: func() float64 { return 0 }, Wait: w.wait})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Chat(context.Background(), ask("fails every time"))
	if retry.ClassOf(err) != retry.Server {
		t.Fatalf("got %v, want the route's server failure", err)
	}
	if len(w.d) != 2 || w.d[0] != time.Second || w.d[1] != 2*time.Second {
		t.Fatalf("waits %v, want [1s 2s]", w.d)
	}
	if n := fx.Srv.Snapshot().Total; n != 3 {
		t.Fatalf("%d calls, want 3", n)
	}
	w.d = nil
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err = p.Chat(ctx, ask("no time to wait")); retry.ClassOf(err) != retry.Server || len(w.d) != 0 {
		t.Fatalf("got %v after waits %v, want the failure at once", err, w.d)
	}
	if _, err := r.Provider("nope", router.Retries{}); err == nil {
		t.Fatal("an unknown route was accepted")
	}
	if _, err := r.Provider("solo", router.Retries{Max: 1}); err == nil {
		t.Fatal("retries with no backoff were accepted")
	}
}
