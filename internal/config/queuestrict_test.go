package config_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/problem"
)

// A queue's shards and weight are whole numbers as YAML writes them:
// shards: 1.5 is refused naming the field and its line, not taken as 1;
// so are a quoted number and a boolean. A number from ${VAR} is read as
// written, and an unknown field in a queue is still reported.
func TestQueueNumbersAreStrict(t *testing.T) {
	base := map[string]string{"OA_KEY": "k", "AN_KEY": "k", "SHARDS": "4"}
	for _, c := range []struct{ name, yaml, want string }{
		{"fractional shards", "queues:\n  default: { shards: 1.5 }\n", "queue shards: 1.5 is a floating-point number, not a whole number"},
		{"quoted shards", "queues:\n  default:\n    shards: \"2\"\n", `queue shards: "2" is a string, not a whole number`},
		{"fractional weight", "queues:\n  default: { weight: 2.5, shards: 2 }\n", "queue weight: 2.5 is a floating-point number, not a whole number"},
		{"boolean shards", "queues:\n  default: { shards: true }\n", "queue shards: true is a boolean, not a whole number"},
		{"a list", "queues:\n  default: { shards: [2] }\n", "queue shards: is a list, not a whole number"},
		{"an unknown field", "queues:\n  default: { shard: 3 }\n", `unknown field "shard"`},
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
	yaml := strings.Replace(good, "worker:\n  concurrency: ${CONC:-20}\n", "queues:\n  default:\n    weight: 3\n    shards: ${SHARDS}\n  low: {}\n  high:\n", 1)
	cfg, err := config.Load(config.Input{Path: write(t, yaml), LookupEnv: env(base)})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(cfg.Shards(), map[string]int{"default": 4}) || cfg.Worker.Queues["default"] != 3 {
		t.Fatalf("shards %v, worker queues %v", cfg.Shards(), cfg.Worker.Queues)
	}
}
