package producer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/agentq/agentq/internal/shard"
	"github.com/agentq/agentq/internal/store"
)

// ErrUnknownQueue is returned for a queue that no live worker serves and
// that no task was ever queued on (a typo, most likely).
var ErrUnknownQueue = errors.New("no such queue")

// QueueInfo is one queue: whether it is paused and how many of its tasks
// are in each state. Its JSON shape is stable (enqueue queue list --json
// and the dashboard's API print it).
type QueueInfo struct {
	Name   string `json:"name"`
	Paused bool   `json:"paused"`
	// Size is every task the queue holds but the completed ones kept for
	// the retention: pending, active, scheduled, retry and archived.
	Size      int `json:"size"`
	Pending   int `json:"pending"`
	Active    int `json:"active"`
	Scheduled int `json:"scheduled"`
	Retry     int `json:"retry"`
	Archived  int `json:"archived"`
	Completed int `json:"completed"`
	// Workers is how many live workers take tasks from it.
	Workers int `json:"workers"`
	// Shards is how many asynq queues it is split in (queues: NAME:
	// shards:, and any an earlier count left); 0: none.
	Shards int `json:"shards,omitempty"`
	// PausedShards is how many of them are paused (Paused: all of
	// them); a pause or resume cut short leaves some.
	PausedShards int `json:"paused_shards,omitempty"`
}

// QueueChange is what PauseQueue and ResumeQueue did.
type QueueChange struct {
	Name   string `json:"name"`
	Paused bool   `json:"paused"` // the queue's state after the call
	// Changed is false when the queue was already in that state.
	Changed bool `json:"changed"`
}

// Queues lists the queues asynq knows and those live workers serve, by
// name, each with its state: a sharded queue's shards (queues: NAME:
// shards:) are one queue, their tasks counted together, paused when
// every shard is.
func (c *Client) Queues(ctx context.Context) ([]QueueInfo, error) {
	registered, serving, counts, err := c.knownQueues(ctx)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for q := range registered {
		names[q] = true
	}
	for q := range serving {
		names[q] = true
	}
	out := make([]QueueInfo, 0, len(names))
	for q := range names {
		info := QueueInfo{Name: q, Workers: serving[q], Paused: true}
		shards := c.shardsOf(q, registered, counts[q])
		if len(shards) > 1 {
			info.Shards = len(shards)
		}
		for _, name := range shards {
			paused, err := c.store.AsynqPaused(ctx, name)
			if err != nil {
				return nil, err
			}
			if paused && len(shards) > 1 {
				info.PausedShards++
			}
			info.Paused = info.Paused && paused
			if !slices.Contains(registered[q], name) {
				continue
			}
			qi, err := c.insp.GetQueueInfo(name)
			if err != nil {
				return nil, fmt.Errorf("queue %s: %w", name, err)
			}
			info.Size += qi.Size
			info.Pending += qi.Pending
			info.Active += qi.Active
			info.Scheduled += qi.Scheduled
			info.Retry += qi.Retry
			info.Archived += qi.Archived
			info.Completed += qi.Completed
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// shardsOf are queue q's asynq queues: its shards at this client's count
// and at each count live workers serve it in, and those Redis holds from
// an earlier count.
func (c *Client) shardsOf(q string, registered map[string][]string, counts map[int]bool) []string {
	out := slices.Clone(shard.Names(q, c.o.Shards[q]))
	for _, n := range slices.Sorted(maps.Keys(counts)) {
		for _, name := range shard.Names(q, n) {
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	for _, name := range registered[q] {
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// PauseQueue stops every worker taking tasks from a queue (all its
// shards): its tasks wait (running ones finish) until ResumeQueue.
// Submits go on being accepted.
func (c *Client) PauseQueue(ctx context.Context, name string) (QueueChange, error) {
	return c.setPaused(ctx, name, true)
}

// ResumeQueue lets workers take tasks from a paused queue (all its
// shards) again.
func (c *Client) ResumeQueue(ctx context.Context, name string) (QueueChange, error) {
	return c.setPaused(ctx, name, false)
}

func (c *Client) setPaused(ctx context.Context, name string, pause bool) (QueueChange, error) {
	registered, serving, counts, err := c.knownQueues(ctx)
	if err != nil {
		return QueueChange{}, err
	}
	if len(registered[name]) == 0 && serving[name] == 0 {
		known := slices.Collect(maps.Keys(registered))
		for q := range serving {
			if !slices.Contains(known, q) {
				known = append(known, q)
			}
		}
		sort.Strings(known)
		return QueueChange{}, fmt.Errorf("queue %q: %w: no live worker serves it and no task was ever queued on it (queues: %s)", name, ErrUnknownQueue, orNoneList(known))
	}
	ch := QueueChange{Name: name, Paused: pause}
	// marked first when paused (a worker that starts serving a new shard
	// of it from here on pauses that shard), cleared first when resumed
	// (one starting meanwhile does not pause a shard again)
	shards := c.shardsOf(name, registered, counts[name])
	if err := c.store.SetQueuePaused(ctx, name, pause, shards...); err != nil {
		return QueueChange{}, err
	}
	for i, q := range shards {
		changed, err := c.setShardPaused(ctx, q, pause)
		if err != nil {
			return QueueChange{}, fmt.Errorf("%s %d of its %d shards, then: %w (run it again to finish)", map[bool]string{true: "paused", false: "resumed"}[pause], i, len(shards), err)
		}
		ch.Changed = ch.Changed || changed
	}
	return ch, nil
}

// setShardPaused pauses or resumes one asynq queue, reporting whether it
// changed.
func (c *Client) setShardPaused(ctx context.Context, name string, pause bool) (bool, error) {
	was, err := c.store.AsynqPaused(ctx, name) // asynq's marker, registered or not
	if err != nil || was == pause {
		return false, err
	}
	if pause {
		err = c.insp.PauseQueue(name)
	} else {
		err = c.insp.UnpauseQueue(name)
	}
	if err != nil {
		// another caller changed it between the read and here: "already
		// paused" or "not paused" means the queue is as asked
		if now, rerr := c.store.AsynqPaused(ctx, name); rerr == nil && now == pause {
			return false, nil
		}
		return false, fmt.Errorf("queue %s: %w", name, err)
	}
	return true, nil
}

// knownQueues are the queues asynq has registered (a task was queued on
// them), by name, each with its asynq queues (a sharded queue's shards),
// and, by name, how many live workers serve each and the shard counts
// they serve it in.
func (c *Client) knownQueues(ctx context.Context) (map[string][]string, map[string]int, map[string]map[int]bool, error) {
	names, err := c.insp.Queues()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("queues: %w", err)
	}
	registered := map[string][]string{}
	for _, q := range names {
		registered[shard.Base(q)] = append(registered[shard.Base(q)], q)
	}
	ads, err := c.fleet.Live(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	serving, counts := map[string]int{}, map[string]map[int]bool{}
	for _, ad := range ads {
		for q := range ad.Queues {
			serving[q]++
			if counts[q] == nil {
				counts[q] = map[int]bool{}
			}
			for _, n := range store.ServedCounts(ad, q) {
				counts[q][n] = true
			}
		}
	}
	return registered, serving, counts, nil
}

func orNoneList(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
