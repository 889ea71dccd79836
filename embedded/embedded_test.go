package embedded_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/embedded"
)

const config = `
providers:
  - { name: primary, kind: openai, base_url: "${PROVIDER_URL}/v1", keys: ["k-primary"], timeout: 5s }
  - { name: down, kind: openai, base_url: "${DEAD_URL}/v1", keys: ["k-down"], timeout: 1s }
routes:
  main: { targets: [ { provider: down, model: m }, { provider: primary, model: m } ], strategy: ordered }
worker: { concurrency: 4, queues: { default: 1 } }
retention: 1h
`

// A worker of the public SDK runs a prompt step and a code step against
// the embedded Redis and provider: the dead provider is refused, the
// other answers, and the code step sees the prompt's answer.
func TestEmbeddedRunsAWorkflow(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	env, err := embedded.Start(ctx, embedded.Options{Config: []byte(config), Scenario: []byte("phases: [ { requests: 1, fault: { status: 503 } }, {} ]\n")})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	ready := make(chan struct{})
	w, err := agentq.NewWorker(env.Config, agentq.WithReady(func() { close(ready) }))
	if err != nil {
		t.Fatal(err)
	}
	w.HandleStep("shout", func(ctx context.Context, s *agentq.Step) (any, error) {
		v, _ := s.Step("ask")
		return map[string]any{"heard": v.Output, "attempt": s.Attempt()}, nil
	})
	wctx, stop := context.WithCancel(ctx)
	werr := make(chan error, 1)
	go func() { werr <- w.Run(wctx) }()
	select {
	case <-ready:
	case err := <-werr:
		t.Fatalf("worker: %v", err)
	}
	client, err := agentq.NewClient(ctx, env.Config)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	spec, err := client.Parse("t.yaml", []byte("name: t\nsteps:\n  - { id: ask, route: main, prompt: hello }\n  - { id: code, depends_on: [ask], run: shout }\n"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := client.Submit(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	wf, err := client.Wait(ctx, id, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if err := <-werr; err != nil {
		t.Fatalf("worker: %v", err)
	}
	if wf.State != agentq.StateCompleted {
		t.Fatalf("workflow %s: %+v", wf.State, wf.Steps)
	}
	res, err := client.Result(ctx, id)
	if err != nil || len(res.Final) != 1 || res.Final[0].JSON == nil {
		t.Fatalf("result %+v, %v", res, err)
	}
	if calls := env.ProviderCalls(); calls["status_503"] != 1 || calls["ok"] != 1 {
		t.Errorf("the provider answered %v, want one 503 and one answer", calls)
	}
}
