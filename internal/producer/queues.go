package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
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
}

// QueueChange is what PauseQueue and ResumeQueue did.
type QueueChange struct {
	Name   string `json:"name"`
	Paused bool   `json:"paused"` // the queue's state after the call
	// Changed is false when the queue was already in that state.
	Changed bool `json:"changed"`
}

// pausedKey is asynq's (v0.26, internal/base.PausedKey) marker of a
// paused queue: read for queues asynq has not registered yet (no task was
// ever queued on them), whose state its Inspector cannot tell.
func pausedKey(queue string) string { return "asynq:{" + queue + "}:paused" }

// Queues lists the queues asynq knows and those live workers serve, by
// name, each with its state.
func (c *Client) Queues(ctx context.Context) ([]QueueInfo, error) {
	registered, serving, err := c.knownQueues(ctx)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, q := range registered {
		names[q] = true
	}
	for q := range serving {
		names[q] = true
	}
	out := make([]QueueInfo, 0, len(names))
	for q := range names {
		info := QueueInfo{Name: q, Workers: serving[q]}
		if slices.Contains(registered, q) {
			qi, err := c.insp.GetQueueInfo(q)
			if err != nil {
				return nil, fmt.Errorf("queue %s: %w", q, err)
			}
			info.Paused, info.Size, info.Pending, info.Active = qi.Paused, qi.Size, qi.Pending, qi.Active
			info.Scheduled, info.Retry, info.Archived, info.Completed = qi.Scheduled, qi.Retry, qi.Archived, qi.Completed
		} else if info.Paused, err = c.pausedMarker(ctx, q); err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// PauseQueue stops every worker taking tasks from a queue: its tasks wait
// (running ones finish) until ResumeQueue. Submits go on being accepted.
func (c *Client) PauseQueue(ctx context.Context, name string) (QueueChange, error) {
	return c.setPaused(ctx, name, true)
}

// ResumeQueue lets workers take tasks from a paused queue again.
func (c *Client) ResumeQueue(ctx context.Context, name string) (QueueChange, error) {
	return c.setPaused(ctx, name, false)
}

func (c *Client) setPaused(ctx context.Context, name string, pause bool) (QueueChange, error) {
	registered, serving, err := c.knownQueues(ctx)
	if err != nil {
		return QueueChange{}, err
	}
	if !slices.Contains(registered, name) && serving[name] == 0 {
		known := append([]string{}, registered...)
		for q := range serving {
			if !slices.Contains(known, q) {
				known = append(known, q)
			}
		}
		sort.Strings(known)
		return QueueChange{}, fmt.Errorf("queue %q: %w: no live worker serves it and no task was ever queued on it (queues: %s)", name, ErrUnknownQueue, orNoneList(known))
	}
	was, err := c.pausedMarker(ctx, name) // asynq's marker, registered or not
	if err != nil {
		return QueueChange{}, err
	}
	ch := QueueChange{Name: name, Paused: pause}
	if was == pause {
		return ch, nil
	}
	if pause {
		err = c.insp.PauseQueue(name)
	} else {
		err = c.insp.UnpauseQueue(name)
	}
	if err != nil {
		// another caller changed it between the read and here: "already
		// paused" or "not paused" means the queue is as asked
		if now, rerr := c.pausedMarker(ctx, name); rerr == nil && now == pause {
			return ch, nil
		}
		return QueueChange{}, fmt.Errorf("queue %s: %w", name, err)
	}
	ch.Changed = true
	return ch, nil
}

// knownQueues are the queues asynq has registered (a task was queued on
// them) and, by name, how many live workers serve each.
func (c *Client) knownQueues(ctx context.Context) ([]string, map[string]int, error) {
	registered, err := c.insp.Queues()
	if err != nil {
		return nil, nil, fmt.Errorf("queues: %w", err)
	}
	ads, err := c.fleet.Live(ctx)
	if err != nil {
		return nil, nil, err
	}
	serving := map[string]int{}
	for _, ad := range ads {
		for q := range ad.Queues {
			serving[q]++
		}
	}
	return registered, serving, nil
}

func (c *Client) pausedMarker(ctx context.Context, queue string) (bool, error) {
	n, err := c.rdb.Exists(ctx, pausedKey(queue)).Result()
	if err != nil {
		return false, fmt.Errorf("queue %s: %w", queue, err)
	}
	return n == 1, nil
}

func orNoneList(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
