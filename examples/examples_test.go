package examples_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/worker"
)

// Every example spec must parse and validate.
func TestExamplesAreValid(t *testing.T) {
	files, _ := filepath.Glob("*.yaml")
	n := 0
	for _, f := range files {
		if f == "agentq.yaml" || f == "local.yaml" { // configurations, not specs
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := spec.ParseSpec(f, data, nil, spec.DefaultLimits()); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		n++
	}
	if n < 3 {
		t.Fatalf("found %d example specs, want at least 3", n)
	}
}

func TestExampleConfigIsValid(t *testing.T) {
	env := func(k string) (string, bool) { return "sk-example", k == "OPENAI_API_KEY" }
	cfg, err := config.Load(config.Input{Path: "agentq.yaml", LookupEnv: env})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile("hello.yaml")
	if _, err := spec.ParseSpec("hello.yaml", data, map[string]bool{"default": cfg.Routes["default"].Targets != nil}, spec.DefaultLimits()); err != nil {
		t.Fatalf("hello.yaml against agentq.yaml: %v", err)
	}
}

// examples/local.yaml as the README's second block runs it: chaosllm on
// 127.0.0.1:8081 (the address the file names), a worker with the file, and
// hello.yaml submitted against it, with only Redis's address changed to
// the test's own.
func TestLocalConfigRunsHello(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:8081")
	if err != nil {
		t.Skipf("127.0.0.1:8081 is taken (%v): cannot serve chaosllm where examples/local.yaml looks for it", err)
	}
	srv, err := chaosllm.New(chaosllm.Scenario{}, chaosllm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { hs.Close() })
	db, rdb := redistest.New(t)
	cfg, err := config.Load(config.Input{Path: "local.yaml", Flags: map[string]string{"redis.addr": db.Addr, "redis.db": strconv.Itoa(db.DB)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- worker.Run(ctx, worker.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler), Redis: rdb, Ready: func() { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatal(err)
	}
	client := producer.NewClient(rdb, producer.ClientOptions{Limits: app.ClientOptions(cfg).Limits, Retention: cfg.Retention.D(), Routes: cfg.RouteNames()})
	data, _ := os.ReadFile("hello.yaml")
	spec, err := client.Parse("hello.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	id, err := client.Submit(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	wf, err := client.Wait(ctx, id, 50*time.Millisecond, nil)
	if err != nil || wf.State != record.StateCompleted {
		t.Fatalf("hello against local.yaml: %v %+v", err, wf)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
