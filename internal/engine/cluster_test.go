package engine_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/internal/worker"
)

// Everything agentq does runs on a Redis Cluster: each script touches one
// hash slot (a workflow's or a provider's), so nothing fails with
// CROSSSLOT. A chord with a fan-in, a key cooldown, a breaker that opens,
// health counts and a cancel, on three masters.
func TestRunsOnARedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node Redis Cluster")
	}
	t.Parallel()
	e := testenv.Start(t, testenv.Options{Cluster: true, Scenario: chaosllm.Scenario{Timelines: []chaosllm.Timeline{
		{Key: testenv.Keys[0], Phases: []chaosllm.Phase{{Requests: 1, Fault: &chaosllm.Fault{Status: 429, RetryAfter: chaosllm.Duration(30 * time.Second)}}, {}}},
		{Endpoint: "anthropic", Phases: []chaosllm.Phase{{Fault: &chaosllm.Fault{Status: 503}}}},
	}}})
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, e.Submit(t, e.Spec(chordSpec(6))))
	}
	for _, id := range ids {
		wf := e.Wait(t, id, 30*time.Second, store.StateCompleted)
		if body := wf.Steps[6]; body.Attempts != 1 || body.State != store.StepDone {
			t.Fatalf("body %+v", body)
		}
	}
	ctx := context.Background()
	if ks, err := store.NewKeyState(e.Redis, nil).Load(ctx, []string{"oa"}); err != nil || len(ks["oa"]) != 1 {
		t.Fatalf("key state on the cluster: %+v %v", ks, err)
	}
	// the backup fails: its breaker opens (scripts on the provider's slot)
	for i := 0; i < breakerThreshold; i++ {
		id := e.Submit(t, e.Spec(step("main", "")))
		e.Wait(t, id, 10*time.Second, store.StateCompleted)
	}
	if err := e.Chaos.SetScenario(chaosllm.Scenario{Timelines: []chaosllm.Timeline{
		{Endpoint: "openai", Phases: []chaosllm.Phase{{Fault: &chaosllm.Fault{Status: 503}}}},
		{Endpoint: "anthropic", Phases: []chaosllm.Phase{{Fault: &chaosllm.Fault{Status: 503}}}}}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < breakerThreshold; i++ {
		id := e.Submit(t, e.Spec(step("main", ", max_retries: 0")))
		e.Wait(t, id, 10*time.Second, store.StateBlocked)
	}
	if b := breakerOf(t, e, "an", "m-an"); b.State.String() != "open" {
		t.Fatalf("backup breaker %+v on the cluster", b)
	}
	id := e.Submit(t, e.Spec(chordSpec(3)))
	if st, err := e.Client.Cancel(ctx, id); err != nil || st != store.StateCanceled {
		t.Fatalf("cancel on the cluster: %q %v", st, err)
	}
	if wfs, err := e.Client.List(ctx, "", 100); err != nil || len(wfs) < 12 {
		t.Fatalf("list on the cluster: %d %v", len(wfs), err)
	}
}

// The worker finds its Redis through Sentinel.
func TestRunsBehindSentinel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis and a sentinel")
	}
	_, sentinel := redistest.Sentinel(t)
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	cfg := e.Config
	cfg.Redis.Sentinel = &config.Sentinel{MasterName: "agentq", Addrs: []string{sentinel}}
	cfg.Redis.Addr, cfg.Redis.DB = "", 0
	rdb, err := app.Redis(context.Background(), cfg.Redis)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	ctx, cancel := context.WithCancel(context.Background())
	o := e.WorkerOptions(slog.New(slog.DiscardHandler))
	o.Config, o.Redis = cfg, nil // the worker connects through the sentinel itself
	ready, done := make(chan struct{}), make(chan error, 1)
	o.Ready = func() { close(ready) }
	go func() { done <- worker.Run(ctx, o) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("worker behind sentinel: %v", err)
	}
	defer func() { cancel(); <-done }()
	client := producer.NewClient(rdb, app.ClientOptions(cfg))
	wspec, err := client.Parse("s.yaml", []byte(step("solo", "")))
	if err != nil {
		t.Fatal(err)
	}
	id, err := client.Submit(ctx, wspec)
	if err != nil {
		t.Fatal(err)
	}
	wf, err := client.Wait(ctx, id, 20*time.Millisecond, nil)
	if err != nil || wf.State != store.StateCompleted {
		t.Fatalf("workflow behind sentinel: %+v %v", wf, err)
	}
}

// The worker's probes on its metrics address: /livez (and /healthz)
// answer while the process serves, whatever Redis does, so a Redis outage
// restarts no worker; /readyz answers only while Redis answers.
func TestWorkerProbes(t *testing.T) {
	srv := redistest.NewServer(t, "--save", "", "--appendonly", "no")
	srv.Start()
	e := testenv.Start(t, testenv.Options{Metrics: true, RedisAddr: srv.Addr()})
	base := strings.TrimSuffix(e.MetricsURL, "/metrics")
	probe := func(path string) int {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, p := range []string{"/livez", "/healthz", "/readyz"} {
		if c := probe(p); c != 200 {
			t.Fatalf("%s %d with Redis up", p, c)
		}
	}
	srv.Stop()
	poll.Until(t, 10*time.Second, func() (bool, string) { return probe("/readyz") == 503, "/readyz still 200 with Redis down" })
	for _, p := range []string{"/livez", "/healthz"} {
		if c := probe(p); c != 200 {
			t.Fatalf("%s %d with Redis down: a liveness probe would restart the worker", p, c)
		}
	}
	srv.Start()
	poll.Until(t, 20*time.Second, func() (bool, string) { return probe("/readyz") == 200, "/readyz not back after Redis" })
}
