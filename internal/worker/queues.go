package worker

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/shard"
	"github.com/agentq/agentq/internal/store"
)

// asynqQueues are the asynq queues the worker serves, with their weights:
// each of served (the queues it advertises, by name) as its shards now
// (queues: NAME: shards:), and every shard Redis holds of a queue it
// serves that another shard count left behind (the workflows submitted
// before a change of count finish there), at the least weight. A shard
// of a queue marked paused is paused before the worker serves it.
func asynqQueues(ctx context.Context, insp *asynq.Inspector, st *store.Store, cfg config.Config, served map[string]int) (map[string]int, error) {
	out := shard.Weights(served, cfg.Shards())
	registered, err := insp.Queues()
	if err != nil {
		return nil, err
	}
	least := 1
	if len(out) > 0 {
		least = slices.Min(slices.Collect(maps.Values(out)))
	}
	for _, q := range registered {
		if _, ok := out[q]; !ok && served[shard.Base(q)] > 0 {
			out[q] = least
		}
	}
	for q := range served {
		paused, err := st.QueuePaused(ctx, q)
		if err != nil || !paused {
			continue // unread: as it was (a pause is asynq's own marker too)
		}
		for name := range out {
			if shard.Base(name) != q {
				continue
			}
			if was, err := st.AsynqPaused(ctx, name); err != nil || was {
				continue
			}
			if err := insp.PauseQueue(name); err != nil {
				return nil, fmt.Errorf("pause %s, a shard of paused queue %s: %w", name, q, err)
			}
		}
	}
	return out, nil
}
