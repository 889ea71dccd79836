package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Tasks a caller enqueues itself: those a write made ready that the store
// did not enqueue in the write's own script (on a Cluster, where a queue's
// keys are in another slot than a workflow's; a rerun's; a decision's).
// Enqueued by asynq's client they are not confirmed by the replicas: a
// failover of the queue's primary could lose a task whose step the record
// says is queued. With durability on they go through EnqueueTasks
// instead: the store's own script, written exactly as asynq's client
// writes them (Task), on one connection to the queue's primary, followed
// by the marker and WAIT (acked), so they are confirmed like the write
// that made them ready.

// ConfirmsTasks reports whether the tasks a caller enqueues must go
// through EnqueueTasks to be confirmed by the replicas (durability on);
// if not, asynq's client enqueues them as it always has.
func (s *Store) ConfirmsTasks() bool { return s.durability.Replicas > 0 }

// EnqueueTask is EnqueueTasks of one task.
func (s *Store) EnqueueTask(ctx context.Context, t Task) error { return s.EnqueueTasks(ctx, t) }

// EnqueueTasks enqueues ts as asynq's client does (a task whose id exists
// is left as it is and counts as enqueued, asynq's ErrTaskIDConflict),
// the tasks of each queue in one script on that queue's slot, and with
// durability on confirms each queue's tasks. Tasks not confirmed in time
// are written all the same, and so are the queues after them (without
// waiting again: the answer is not confirmed already); the answer is then
// an ErrNotConfirmed, wrapped, once every task is written.
func (s *Store) EnqueueTasks(ctx context.Context, ts ...Task) error {
	var unconfirmed error
	for _, q := range byQueue(ts) {
		if err := s.registerQueue(ctx, q[0].Queue); err != nil {
			return err
		}
		keys := make([]string, 0, 2*len(q))
		args := make([]any, 0, 1+2*len(q))
		args = append(args, s.nowNanos())
		for i := range q {
			keys, _ = taskKeys(keys, &q[i])
			args = append(args, q[i].ID, q[i].message())
		}
		write := func(c redis.Cmdable) error { return enqueueScript.Run(ctx, c, keys, args...).Err() }
		var err error
		if unconfirmed != nil {
			err = write(s.rdb)
		} else {
			err = s.acked(ctx, asynqPendingKey(q[0].Queue), write)
		}
		if err != nil {
			err = fmt.Errorf("store: enqueue %s: %w", taskIDs(q), err)
			if !errors.Is(err, ErrNotConfirmed) {
				return err
			}
			unconfirmed = err
		}
	}
	return unconfirmed
}

// enqueueScript enqueues tasks of one queue (luaEnqueue).
// KEYS: per task its task key and the queue's pending key. ARGV: now in
// nanoseconds, then per task its id and message.
var enqueueScript = redis.NewScript(luaEnqueue + `
for i = 1, #KEYS, 2 do
  enqueue(KEYS[i], KEYS[i + 1], ARGV[i + 1], ARGV[i + 2], ARGV[1])
end
return 0
`)

// byQueue splits ts by queue, in the order the queues first come.
func byQueue(ts []Task) [][]Task {
	var out [][]Task
	at := map[string]int{}
	for _, t := range ts {
		i, ok := at[t.Queue]
		if !ok {
			i = len(out)
			at[t.Queue] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], t)
	}
	return out
}

// taskIDs names the tasks of an error: the first id, and how many more.
func taskIDs(ts []Task) string {
	if len(ts) == 1 {
		return ts[0].ID
	}
	return ts[0].ID + " and " + strconv.Itoa(len(ts)-1) + " more"
}
