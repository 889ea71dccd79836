package worker

import (
	"maps"
	"slices"
	"testing"

	"github.com/agentq/agentq/internal/shard"
)

// A worker advertises every shard count it serves whole: its own, and
// one whose leftover shards it serves; a count with a shard missing is
// not.
func TestServedCounts(t *testing.T) {
	queues := shard.Weights(map[string]int{"default": 3, "low": 1}, map[string]int{"default": 6})
	if got := servedCounts(queues, map[string]int{"default": 3, "low": 1}); !maps.EqualFunc(got, map[string][]int{"default": {6}}, slices.Equal) {
		t.Fatalf("6 shards: %v", got)
	}
	for _, name := range append(shard.Names("default", 2), "default") { // left by counts 2 and 1
		queues[name] = 1
	}
	queues[shard.Names("default", 3)[1]] = 1 // 1 of 3: not whole
	if got := servedCounts(queues, map[string]int{"default": 3, "low": 1}); !maps.EqualFunc(got, map[string][]int{"default": {1, 2, 6}}, slices.Equal) {
		t.Fatalf("6 shards and leftovers: %v", got)
	}
	if got := servedCounts(map[string]int{"default": 1, "mail.low": 1}, map[string]int{"default": 1}); got != nil {
		t.Fatalf("no shards: %v", got)
	}
}
