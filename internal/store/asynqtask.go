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
// as the record write that makes it ready: Create's root steps, Settle's
// ready dependents and the map instance a settle releases. Enqueued by the asynq client, each would be
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
// is false) and the caller enqueues: with the asynq client, or, with
// durability on, with the store's own script on the queue's primary
// (EnqueueTasks, confirmed there). A server in
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
	head, rest := t.messageEnds()
	b := make([]byte, 0, len(head)+len(rest)+16+len(t.Payload)+len(t.ID))
	b = append(b, head...)
	b = appendBytesField(b, 2, t.Payload)
	b = appendBytesField(b, 3, []byte(t.ID))
	return append(b, rest...)
}

// messageEnds is the message without its payload (field 2) and id (field
// 3): the type before them, the queue and settings after them.
func (t Task) messageEnds() (head, rest []byte) {
	timeout := t.Timeout
	if timeout == 0 {
		timeout = asynqDefaultTimeout
	}
	head = appendBytesField(nil, 1, []byte(t.Type))
	rest = appendBytesField(nil, 4, []byte(t.Queue))
	for _, f := range []struct {
		n protowire.Number
		v int64
	}{{5, int64(int32(max(t.MaxRetry, 0)))}, {8, int64(timeout.Seconds())}, {12, int64(t.Retention.Seconds())}} {
		if f.v != 0 {
			rest = protowire.AppendTag(rest, f.n, protowire.VarintType)
			rest = protowire.AppendVarint(rest, uint64(f.v))
		}
	}
	return head, rest
}

// appendBytesField appends a length-delimited field unless v is empty
// (proto3 leaves empty strings out).
func appendBytesField(b []byte, n protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// ReleaseProbe is the instance index a map instance's settle builds
// Outcome.Release for: the settle script writes the index it releases in
// its place, in the task's id and payload.
const ReleaseProbe = 987654321

// releaseArgs are Outcome.Release split around ReleaseProbe for the
// settle script (asynq's task key prefix, the id's and the payload's text
// before and after the index, the message's two ends); ok is false when
// the probe is not found exactly once in each (then the caller enqueues).
func releaseArgs(t *Task) (args []any, ok bool) {
	probe := strconv.Itoa(ReleaseProbe)
	if t == nil || strings.Count(t.ID, probe) != 1 || strings.Count(string(t.Payload), probe) != 1 {
		return nil, false
	}
	idPre, idSuf, _ := strings.Cut(t.ID, probe)
	plPre, plSuf, _ := strings.Cut(string(t.Payload), probe)
	head, rest := t.messageEnds()
	return []any{asynqTaskKey(t.Queue, ""), idPre, idSuf, plPre, plSuf, head, rest}, true
}

// asynqTaskKey and asynqPendingKey are asynq's keys for a task and its
// queue's pending list; asynqQueues is the set of queue names asynq's
// Inspector (and so the dashboard) lists.
func asynqTaskKey(queue, id string) string { return asynqKey(queue, "t:"+id) }
func asynqPendingKey(queue string) string  { return asynqKey(queue, "pending") }

// asynqKey is asynq's key name of queue: all of a queue's keys are in
// its hash slot.
func asynqKey(queue, name string) string { return "asynq:{" + queue + "}:" + name }

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
// enqueue ready steps (tk: task key, pk: pending key); message builds a
// task's message from its ends (Task.messageEnds), payload and id.
const luaEnqueue = `
local function enqueue(tk, pk, id, msg, nowns)
  if redis.call('EXISTS', tk) == 1 then return end
  redis.call('HSET', tk, 'msg', msg, 'state', 'pending', 'pending_since', nowns)
  redis.call('LPUSH', pk, id)
end
local function varint(n)
  local s = ''
  while n >= 128 do
    s = s .. string.char(n % 128 + 128)
    n = math.floor(n / 128)
  end
  return s .. string.char(n)
end
local function message(head, payload, id, rest)
  return head .. '\18' .. varint(#payload) .. payload .. '\26' .. varint(#id) .. id .. rest
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
