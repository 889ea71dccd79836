package main

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// The SDK worker runs as its image does (the configuration from
// AGENTQ_CONFIG, here examples/local.yaml with its addresses from
// REDIS_ADDR and CHAOSLLM_URL: no edited copy), serves its code step, and
// workflow.yaml completes through it, against a real Redis and chaosllm
// over HTTP.
func TestSDKWorkerRunsTheWorkflow(t *testing.T) {
	chaos, err := chaosllm.New(chaosllm.Scenario{}, chaosllm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db, _ := redistest.New(t)
	t.Setenv("CHAOSLLM_URL", testenv.ServeChaos(t, chaos))
	t.Setenv("REDIS_ADDR", db.Addr)
	t.Setenv("AGENTQ_REDIS_DB", strconv.Itoa(db.DB))
	t.Setenv("AGENTQ_CONFIG", "../local.yaml")

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, os.Getenv("AGENTQ_CONFIG"), slog.New(slog.DiscardHandler)) }()

	cfg, err := agentq.LoadConfig(os.Getenv("AGENTQ_CONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	client, err := agentq.NewClient(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	data, err := os.ReadFile("workflow.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := client.Parse("workflow.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	// the submit is checked against live workers: it goes through once the
	// SDK worker has advertised its code step
	var id string
	for id == "" {
		if id, err = client.Submit(ctx, spec); err != nil && ctx.Err() != nil {
			t.Fatalf("submit: %v", err)
		}
		select {
		case err := <-done:
			t.Fatalf("the worker stopped: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	wf, err := client.Wait(ctx, id, 50*time.Millisecond)
	if err != nil || wf.State != agentq.StateCompleted {
		t.Fatalf("workflow: %v %+v", err, wf)
	}
	if n, err := strconv.Atoi(wf.Steps[1].Output); err != nil || n < 3 {
		t.Fatalf("count's output %q: want the number of words of the answer", wf.Steps[1].Output)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("the worker's graceful stop: %v", err)
	}
}
