package engine

import (
	"context"
	"strings"
	"time"

	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/tasks"
)

// The wake of a concurrency key's waiter. A release that hands a freed
// slot to a waiting step enqueues that step's task (keyslot.go) and marks
// the releasing task's worker slot to drain the task's queue: once the
// releasing task and what it handed on are done, the slot takes the
// queue's oldest task, as asynq's processor would at its next poll, and
// runs it as a hand-off (handoff.go), then the next one, while the queue
// has tasks. The woken step thus starts as soon as the slot frees,
// without waiting for a poll, and a task that waited before it in its
// queue (another tenant's step) goes first: a key's waiters hold no
// worker slot and sit in no queue until a slot is theirs. A slot drains
// only while the worker has a free slot: with every slot busy, asynq's
// processor waits for one and takes the next task at once, by its
// queues' weights, so the slot goes back to it. If the worker dies before
// it takes the task, the task is in the queue for any worker; after,
// asynq's recoverer brings it back when its lease lapses.

// wake marks the worker slot ctx's task holds to drain queue once the
// task is done, if the slot is open and this worker serves queue.
func (ho *Handoffs) wake(ctx context.Context, queue string) {
	s, _ := ctx.Value(slotKey{}).(*slot)
	if s == nil || !ho.queues[queue] {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open {
		s.drain = queue
	}
}

// takeNext takes queue's oldest task for a slot that drains it: nil when
// every slot of the worker is busy, when the queue is empty or paused, or
// when its oldest task is not a step's or its step's timeout does not fit
// before until (then it goes back to the head of the queue, for asynq).
func (ho *Handoffs) takeNext(ctx context.Context, queue string, until time.Time) *claimed {
	if ho.busy.Load() >= int64(ho.o.Concurrency) {
		return nil // asynq's processor waits for this slot: it takes the next task at once
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	t, err := ho.h.st.ClaimNext(cctx, queue, ho.o.Now().Add(store.TaskLease))
	cancel()
	if t == nil {
		if err != nil {
			ho.h.o.Logger.Warn("could not take the next task of a queue after a concurrency slot was handed on (asynq takes it at its next poll)",
				"queue", queue, "err", store.Excerpt(err.Error()))
		}
		return nil
	}
	timeout := stepTimeout(t)
	if err != nil || !strings.HasPrefix(t.Type, tasks.TypeStep) || ho.o.Now().Add(timeout+handoffMargin).After(until) {
		ho.requeue(ctx, t)
		return nil
	}
	return &claimed{t: t, timeout: timeout}
}

// stepTimeout is the timeout of the step claimed task t runs: its asynq
// timeout less its payload's slack (flow.HandoffSlack); asynq's default
// 30 minutes for a task without one.
func stepTimeout(t *store.ClaimedTask) time.Duration {
	if t.Timeout <= 0 {
		return 30 * time.Minute
	}
	d := time.Duration(t.Timeout) * time.Second
	if p, err := tasks.DecodePayload(t.Payload); err == nil && p.Slack > 0 && time.Duration(p.Slack)*time.Second < d {
		d -= time.Duration(p.Slack) * time.Second
	}
	return d
}
