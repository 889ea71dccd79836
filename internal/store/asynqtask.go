package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/encoding/protowire"
)

// Task is an asynq task that the store enqueues itself, in the same script
// as the record write that makes it ready: Create's root steps and
// Settle's ready dependents. Enqueued by the asynq client, each would be
// another round trip after the write (one per step of a chain or a chord,
// about a fifth of a step's Redis round trips). The store writes it
// exactly as asynq's client does (TestStoreEnqueuesTasksAsAsynqDoes holds
// the bytes equal to github.com/hibiken/asynq v0.26.0's): the task hash
// ("msg", "state" pending, "pending_since"), its id pushed on the queue's
// pending list, nothing written if a task with its id exists (asynq's
// ErrTaskIDConflict, which callers count as success).
//
// Against a Redis Cluster the queue's keys live in another slot than the
// workflow's, so there the store enqueues nothing itself (EnqueuesTasks
// is false) and the caller enqueues with the asynq client. A server in
// cluster mode reached through a plain client (a one-shard managed
// cluster, say) refuses the first such script with CROSSSLOT: the store
// then stops enqueueing for good and runs the script again without the
// tasks.
type Task struct {
	ID, Queue, Type string
	Payload         []byte
	MaxRetry        int
	// Timeout is asynq's, kept in whole seconds; zero is asynq's default
	// (30 minutes).
	Timeout   time.Duration
	Retention time.Duration
}

// asynqDefaultTimeout is what asynq's client stores for a task without a
// timeout or deadline.
const asynqDefaultTimeout = 30 * time.Minute

// message is t as asynq's TaskMessage protobuf, byte for byte what asynq's
// client marshals: proto3 fields in field-number order, zero values left
// out (the deadline is asynq's "none", Unix time 0).
func (t Task) message() []byte {
	timeout := t.Timeout
	if timeout == 0 {
		timeout = asynqDefaultTimeout
	}
	b := make([]byte, 0, 48+len(t.Type)+len(t.Payload)+len(t.ID)+len(t.Queue))
	str := func(n protowire.Number, v []byte) {
		if len(v) > 0 {
			b = protowire.AppendTag(b, n, protowire.BytesType)
			b = protowire.AppendBytes(b, v)
		}
	}
	num := func(n protowire.Number, v int64) {
		if v != 0 {
			b = protowire.AppendTag(b, n, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(v))
		}
	}
	str(1, []byte(t.Type))
	str(2, t.Payload)
	str(3, []byte(t.ID))
	str(4, []byte(t.Queue))
	num(5, int64(int32(max(t.MaxRetry, 0))))
	num(8, int64(timeout.Seconds()))
	num(12, int64(t.Retention.Seconds()))
	return b
}

// asynqTaskKey and asynqPendingKey are asynq's keys for a task and its
// queue's pending list; asynqQueues is the set of queue names asynq's
// Inspector (and so the dashboard) lists.
func asynqTaskKey(queue, id string) string { return "asynq:{" + queue + "}:t:" + id }
func asynqPendingKey(queue string) string  { return "asynq:{" + queue + "}:pending" }

const asynqQueues = "asynq:queues"

// EnqueuesTasks reports whether Create and Settle enqueue the Tasks they
// are given (see Task); when false the caller enqueues them.
func (s *Store) EnqueuesTasks() bool { return s.fused.Load() }

// crossSlot reports whether err is Redis refusing keys of several slots in
// one script (a server in cluster mode), and if so stops the store
// enqueueing tasks itself.
func (s *Store) crossSlot(err error) bool {
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		return false
	}
	s.fused.Store(false)
	return true
}

// luaEnqueue is asynq's enqueue script as a function of the scripts that
// enqueue ready steps (tk: task key, pk: pending key).
const luaEnqueue = `
local function enqueue(tk, pk, id, msg, nowns)
  if redis.call('EXISTS', tk) == 1 then return end
  redis.call('HSET', tk, 'msg', msg, 'state', 'pending', 'pending_since', nowns)
  redis.call('LPUSH', pk, id)
end
`

// taskKeys appends t's keys to keys and returns them with the index (in
// KEYS, 1-based) of its task key; its pending key follows it.
func taskKeys(keys []string, t *Task) ([]string, int) {
	keys = append(keys, asynqTaskKey(t.Queue, t.ID), asynqPendingKey(t.Queue))
	return keys, len(keys) - 1
}

// registerQueue adds a queue to asynq's set of queues, once per queue for
// the store's life (as asynq's client does).
func (s *Store) registerQueue(ctx context.Context, queue string) error {
	if _, ok := s.queues.Load(queue); ok {
		return nil
	}
	if err := s.rdb.SAdd(ctx, asynqQueues, queue).Err(); err != nil {
		return fmt.Errorf("store: register queue %q: %w", queue, err)
	}
	s.queues.Store(queue, true)
	return nil
}

// nowNanos is the pending_since asynq writes.
func (s *Store) nowNanos() string { return strconv.FormatInt(s.now().UnixNano(), 10) }

// fusable reports whether the store can enqueue tasks in its own scripts:
// not on a Redis Cluster (nor a ring), where asynq's keys are in other
// slots than a workflow's.
func fusable(rdb redis.UniversalClient) bool {
	switch rdb.(type) {
	case *redis.ClusterClient, *redis.Ring:
		return false
	}
	return true
}
