package worker

import (
	"maps"
	"slices"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/shard"
)

// asynqQueues are the asynq queues the worker serves, with their weights:
// each of served (the queues it advertises, by name) as its shards now
// (queues: NAME: shards:), and every shard Redis holds of a queue it
// serves that another shard count left behind (the workflows submitted
// before a change of count finish there), at the least weight.
func asynqQueues(insp *asynq.Inspector, cfg config.Config, served map[string]int) (map[string]int, error) {
	out := shard.Weights(served, cfg.Shards())
	registered, err := insp.Queues()
	if err != nil {
		return nil, err
	}
	least := slices.Min(slices.Collect(maps.Values(out)))
	for _, q := range registered {
		if _, ok := out[q]; !ok && served[shard.Base(q)] > 0 {
			out[q] = least
		}
	}
	return out, nil
}
