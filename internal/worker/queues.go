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
// before a change of count finish there), at the least weight. The
// shards of a queue still paused are paused before the worker serves
// them (pausePaused).
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
		if err := pausePaused(ctx, insp, st, q, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// pausePaused pauses the shards of queue q among names that are not
// paused, when q is marked paused and a shard its pause paused still is
// (the mark of a queue resumed from elsewhere, asynqmon, is stale:
// cleared).
// A resume while it pauses them (the mark gone after) is undone.
func pausePaused(ctx context.Context, insp *asynq.Inspector, st *store.Store, q string, names map[string]int) error {
	marked, err := st.QueuePaused(ctx, q)
	if err != nil || len(marked) == 0 {
		return err
	}
	var running []string
	stillPaused := false
	for _, name := range marked {
		paused, err := st.AsynqPaused(ctx, name)
		if err != nil {
			return err
		}
		stillPaused = stillPaused || paused
	}
	for name := range names {
		if shard.Base(name) != q {
			continue
		}
		paused, err := st.AsynqPaused(ctx, name)
		if err != nil {
			return err
		}
		if !paused {
			running = append(running, name)
		}
	}
	if !stillPaused {
		return st.SetQueuePaused(ctx, q, false)
	}
	var pausedHere []string
	for _, name := range running {
		if err := insp.PauseQueue(name); err != nil {
			if now, rerr := st.AsynqPaused(ctx, name); rerr == nil && now {
				continue // paused meanwhile by another
			}
			return fmt.Errorf("pause %s, a shard of paused queue %s: %w", name, q, err)
		}
		pausedHere = append(pausedHere, name)
	}
	if marked, err := st.QueuePaused(ctx, q); err == nil && len(marked) == 0 {
		for _, name := range pausedHere {
			_ = insp.UnpauseQueue(name) // resumed meanwhile: as the resume left them
		}
	}
	return nil
}

// servedCounts are, for each queue of served (by name) that asynq
// queues (what the worker's asynq server serves) holds at a count above
// 1, every shard count whose shards are all among them: its
// advertisement's Shards.
func servedCounts(queues map[string]int, served map[string]int) map[string][]int {
	var out map[string][]int
	for q := range served {
		candidates := map[int]bool{}
		if _, ok := queues[q]; ok {
			candidates[1] = true
		}
		for name := range queues {
			if base, i, ok := shard.Parse(name); ok && base == q {
				candidates[i+1] = true // a count of which it is the last shard, maybe
			}
		}
		var counts []int
		for n := range candidates {
			if all(shard.Names(q, n), queues) {
				counts = append(counts, n)
			}
		}
		slices.Sort(counts)
		if len(counts) > 0 && !slices.Equal(counts, []int{1}) {
			if out == nil {
				out = map[string][]int{}
			}
			out[q] = counts
		}
	}
	return out
}

func all(names []string, in map[string]int) bool {
	for _, n := range names {
		if _, ok := in[n]; !ok {
			return false
		}
	}
	return true
}
