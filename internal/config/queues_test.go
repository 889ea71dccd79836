package config_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/problem"
	"github.com/agentq/agentq/internal/shard"
)

// Declared queues: their shards for producers and workers, their
// weights for a worker that names no queues of its own.
func TestDeclaredQueues(t *testing.T) {
	base := map[string]string{"OA_KEY": "k", "AN_KEY": "k"}
	load := func(t *testing.T, yaml string) config.Config {
		t.Helper()
		cfg, err := config.Load(config.Input{Path: write(t, yaml), LookupEnv: env(base)})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	declared := good + "queues:\n  default: { weight: 3, shards: 6 }\n  critical: { weight: 6 }\n  low: {}\n"
	cfg := load(t, declared)
	if !maps.Equal(cfg.Worker.Queues, map[string]int{"default": 3, "critical": 6, "low": 1}) {
		t.Fatalf("worker.queues from the declared queues: %v", cfg.Worker.Queues)
	}
	if !maps.Equal(cfg.Shards(), map[string]int{"default": 6}) {
		t.Fatalf("shards: %v", cfg.Shards())
	}
	served := shard.Weights(cfg.Worker.Queues, cfg.Shards())
	if len(served) != 8 || served["critical"] != 12 || served["low"] != 2 {
		t.Fatalf("served: %v (want 6 shards of default at 1, critical 12, low 2)", served)
	}
	for _, name := range shard.Names("default", 6) {
		if served[name] != 1 {
			t.Fatalf("served: %v, %s missing", served, name)
		}
	}
	// worker.queues wins for the worker; the shards stay the declared ones
	cfg = load(t, strings.Replace(declared, "concurrency: ${CONC:-20}", "concurrency: 4\n  queues: { default: 1 }", 1))
	if !maps.Equal(cfg.Worker.Queues, map[string]int{"default": 1}) || len(shard.Weights(cfg.Worker.Queues, cfg.Shards())) != 6 {
		t.Fatalf("worker.queues set: %v, served %v", cfg.Worker.Queues, shard.Weights(cfg.Worker.Queues, cfg.Shards()))
	}
	// none declared: the built-in queues, no shards
	cfg = load(t, good)
	if cfg.Shards() != nil || len(cfg.Worker.Queues) != 3 || !maps.Equal(shard.Weights(cfg.Worker.Queues, cfg.Shards()), cfg.Worker.Queues) {
		t.Fatalf("nothing declared: shards %v, queues %v, served %v", cfg.Shards(), cfg.Worker.Queues, shard.Weights(cfg.Worker.Queues, cfg.Shards()))
	}

	for _, c := range []struct{ name, yaml, want string }{
		{"too many shards", "queues:\n  default: { shards: 129 }\n", "queues.default.shards: 129 is not between 0 and 128"},
		{"negative weight", "queues:\n  default: { weight: -1 }\n", "queues.default.weight: -1 is under 0"},
		{"a shard's name", "queues:\n  default.1: { shards: 2 }\n", `queues.default.1: "default.1" is not a queue name`},
		{"a worker queue named as a shard", "worker:\n  queues: { default.2: 1 }\n", `worker.queues: queue "default.2": a "." marks a shard; declare shards with queues.default.shards`},
		{"an unknown field", "queues:\n  default: { shard: 3 }\n", `unknown field "shard"`},
		{"no queue for the worker", "queues:\n  default: { shards: 2 }\nworker:\n  queues: {}\n", "worker.queues: is empty"},
		{"a sharded webhooks queue", "queues:\n  webhooks: { shards: 2 }\n", "queues.webhooks.shards: the webhooks queue is not sharded"},
	} {
		t.Run(c.name, func(t *testing.T) {
			yaml := strings.Replace(good, "worker:\n  concurrency: ${CONC:-20}\n", c.yaml, 1)
			_, err := config.Load(config.Input{Path: write(t, yaml), LookupEnv: env(base)})
			lines := problem.Lines(err)
			if len(lines) != 1 || !strings.Contains(lines[0], c.want) {
				t.Fatalf("problems %q, want one with %q", lines, c.want)
			}
		})
	}
}
