package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/encoding/protowire"
)

// A hand-off (engine/handoff.go) runs a step's task on the worker that
// made it ready, without waiting for asynq's next poll. The worker takes
// the task from its queue's pending list itself, and every move after
// that is asynq's own, written as asynq v0.26.0 writes it
// (TestHandedOffTasksEndAsAsynqEndsThem holds the two equal): the task is
// active under a lease in asynq's lease set, so asynq's recoverer retries
// it if the worker dies; it ends completed, retried (its message's
// retried count, error and failure time updated, the queue's processed and
// failed counts too) or archived, exactly as if asynq's processor had run
// it. A paused queue's task is not taken.

// TaskLease is asynq's lease on an active task: its recoverer retries a
// task whose lease is this long past without an extension.
const TaskLease = 30 * time.Second

// ClaimedTask is a task a worker took from its queue's pending list
// itself, with the fields of asynq's message that decide how it ends.
type ClaimedTask struct {
	ID, Queue, Type string
	Payload         []byte
	// Retry is its max retries, Retried its retries so far.
	Retry, Retried int
	// Timeout (seconds) and Deadline (Unix seconds) are asynq's: zero is
	// none.
	Timeout, Deadline int64
	// Retention (seconds) keeps it completed; zero deletes it when done.
	Retention int64
	msg       []byte
	unique    bool // a uniqueness lock or a group: left to asynq
}

// ErrNotClaimable is ClaimTask's answer for a task with a uniqueness lock
// or a group, which hand-offs leave to asynq (a step's task has neither).
var ErrNotClaimable = errors.New("store: task has a uniqueness lock or a group")

const taskStatsTTL = 90 * 24 * time.Hour // asynq's statsTTL

// luaClaim is asynq's dequeue for one task id: nothing if the queue is
// paused, holds more than ARGV[3] tasks (others were waiting first), or
// the task is no longer pending (another worker took it).
var luaClaim = redis.NewScript(`
if redis.call('EXISTS', KEYS[2]) == 1 then return false end
if redis.call('LLEN', KEYS[1]) > tonumber(ARGV[3]) then return false end
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 0 then return false end
redis.call('LPUSH', KEYS[3], ARGV[1])
redis.call('HSET', KEYS[5], 'state', 'active')
redis.call('HDEL', KEYS[5], 'pending_since')
redis.call('ZADD', KEYS[4], ARGV[2], ARGV[1])
return redis.call('HGET', KEYS[5], 'msg')`)

// ClaimTask takes task id of queue for this worker, active until lease,
// if the queue's pending list holds at most pending tasks (the ones the
// caller enqueued itself: any more were waiting before them). Nil and no
// error: the task is not pending (taken, or never enqueued), others wait,
// or the queue is paused.
func (s *Store) ClaimTask(ctx context.Context, queue, id string, pending int, lease time.Time) (*ClaimedTask, error) {
	keys := []string{asynqPendingKey(queue), asynqKey(queue, "paused"), asynqKey(queue, "active"), asynqKey(queue, "lease"), asynqTaskKey(queue, id)}
	res, err := luaClaim.Run(ctx, s.rdb, keys, id, lease.Unix(), max(pending, 1)).Text()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: claim task %s: %w", id, err)
	}
	t, err := decodeTaskMessage([]byte(res))
	if err != nil {
		return nil, fmt.Errorf("store: claim task %s: %w", id, err)
	}
	if t.unique {
		return t, ErrNotClaimable
	}
	return t, nil
}

// luaClaimNext is asynq's dequeue of one queue (rdb.dequeueCmd): its
// oldest pending task, unless the queue is paused.
var luaClaimNext = redis.NewScript(`
if redis.call('EXISTS', KEYS[2]) == 1 then return false end
local id = redis.call('RPOPLPUSH', KEYS[1], KEYS[3])
if not id then return false end
local key = ARGV[2] .. id
redis.call('HSET', key, 'state', 'active')
redis.call('HDEL', key, 'pending_since')
redis.call('ZADD', KEYS[4], ARGV[1], id)
return redis.call('HGET', key, 'msg')`)

// ClaimNext takes queue's oldest pending task for this worker, active
// until lease, as asynq's dequeue would. Nil and no error: the queue is
// empty or paused. A task with a uniqueness lock or a group comes with
// ErrNotClaimable (put it back: RequeueTask).
func (s *Store) ClaimNext(ctx context.Context, queue string, lease time.Time) (*ClaimedTask, error) {
	keys := []string{asynqPendingKey(queue), asynqKey(queue, "paused"), asynqKey(queue, "active"), asynqKey(queue, "lease")}
	res, err := luaClaimNext.Run(ctx, s.rdb, keys, lease.Unix(), asynqTaskKey(queue, "")).Text()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: claim the next task of %s: %w", queue, err)
	}
	t, err := decodeTaskMessage([]byte(res))
	if err != nil {
		return nil, fmt.Errorf("store: claim the next task of %s: %w", queue, err)
	}
	if t.unique {
		return t, ErrNotClaimable
	}
	return t, nil
}

// luaExtend extends the leases of the tasks still leased (ZADD XX, as
// asynq's heartbeat), and returns those that are not: their lease lapsed
// and asynq's recoverer took them back.
var luaExtend = redis.NewScript(`
local lost = {}
for i = 2, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], 'XX', ARGV[1], ARGV[i])
  else
    lost[#lost + 1] = ARGV[i]
  end
end
return lost`)

// ExtendTaskLeases extends the leases of queue's tasks ids to until and
// returns the ids whose lease was gone.
func (s *Store) ExtendTaskLeases(ctx context.Context, queue string, ids []string, until time.Time) ([]string, error) {
	args := make([]any, 0, len(ids)+1)
	args = append(args, until.Unix())
	for _, id := range ids {
		args = append(args, id)
	}
	lost, err := luaExtend.Run(ctx, s.rdb, []string{asynqKey(queue, "lease")}, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("store: extend task leases: %w", err)
	}
	return lost, nil
}

// luaTaskStats is asynq's count of a processed (and a failed) task, as
// its scripts keep it: a day's count that expires, and a total that wraps.
const luaTaskStats = `
local function count(day, total, expireat, maxint)
  local n = redis.call('INCR', day)
  if tonumber(n) == 1 then redis.call('EXPIREAT', day, expireat) end
  if tonumber(redis.call('GET', total)) == tonumber(maxint) then
    redis.call('SET', total, 1)
  else
    redis.call('INCR', total)
  end
end
local function leave(active, lease, id)
  if redis.call('LREM', active, 0, id) == 0 then return false end
  return redis.call('ZREM', lease, id) == 1
end
`

// KEYS: active, lease, the state's set (completed, retry, archived; none
// for done), task, processed day, processed total, failed day, failed
// total. ARGV: id, msg, state ("" deletes the task), score,
// stats expiry, max int64, failed (1 or 0), archive cutoff, task key prefix.
var luaEndTask = redis.NewScript(luaTaskStats + `
if not leave(KEYS[1], KEYS[2], ARGV[1]) then return redis.error_reply('NOT FOUND') end
if ARGV[3] == '' then
  redis.call('DEL', KEYS[4])
else
  redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
  if ARGV[3] == 'archived' then
    local old = redis.call('ZRANGE', KEYS[3], '-inf', ARGV[8], 'BYSCORE')
    for _, id in ipairs(old) do redis.call('DEL', ARGV[9] .. id) end
    if #old > 0 then redis.call('ZREM', KEYS[3], unpack(old)) end
    local extra = redis.call('ZRANGE', KEYS[3], 0, -10000)
    for _, id in ipairs(extra) do redis.call('DEL', ARGV[9] .. id) end
    if #extra > 0 then redis.call('ZREM', KEYS[3], unpack(extra)) end
  end
  redis.call('HSET', KEYS[4], 'msg', ARGV[2], 'state', ARGV[3])
end
if ARGV[3] ~= 'retry' or ARGV[7] == '1' then
  count(KEYS[5], KEYS[6], ARGV[5], ARGV[6])
end
if ARGV[7] == '1' then count(KEYS[7], KEYS[8], ARGV[5], ARGV[6]) end
return 'OK'`)

// CompleteTask ends a claimed task that succeeded: completed for its
// retention, or deleted without one.
func (s *Store) CompleteTask(ctx context.Context, t *ClaimedTask) error {
	now := s.now()
	if t.Retention <= 0 {
		return s.endTask(ctx, t, "", t.msg, 0, false)
	}
	msg := editMessage(t.msg, msgField{13, now.Unix(), ""})
	return s.endTask(ctx, t, "completed", msg, now.Unix()+t.Retention, false)
}

// RetryTask ends a claimed task that failed with errMsg, to run again at
// at; failure counts it (and its retries) as asynq's IsFailure does.
func (s *Store) RetryTask(ctx context.Context, t *ClaimedTask, at time.Time, errMsg string, failure bool) error {
	retried := t.Retried
	if failure {
		retried++
	}
	msg := editMessage(t.msg, msgField{6, int64(retried), ""}, msgField{7, 0, errMsg}, msgField{11, s.now().Unix(), ""})
	return s.endTask(ctx, t, "retry", msg, at.Unix(), failure)
}

// ArchiveTask ends a claimed task that failed with errMsg for good.
func (s *Store) ArchiveTask(ctx context.Context, t *ClaimedTask, errMsg string) error {
	now := s.now().Unix()
	msg := editMessage(t.msg, msgField{7, 0, errMsg}, msgField{11, now, ""})
	return s.endTask(ctx, t, "archived", msg, now, true)
}

func (s *Store) endTask(ctx context.Context, t *ClaimedTask, state string, msg []byte, score int64, failed bool) error {
	now := s.now()
	set := state
	if set == "" {
		set = "completed" // unused: a done task is deleted
	}
	keys := []string{asynqKey(t.Queue, "active"), asynqKey(t.Queue, "lease"), asynqKey(t.Queue, set), asynqTaskKey(t.Queue, t.ID),
		asynqKey(t.Queue, "processed:"+now.UTC().Format("2006-01-02")), asynqKey(t.Queue, "processed"),
		asynqKey(t.Queue, "failed:"+now.UTC().Format("2006-01-02")), asynqKey(t.Queue, "failed")}
	f := "0"
	if failed {
		f = "1"
	}
	err := luaEndTask.Run(ctx, s.rdb, keys, t.ID, msg, state, score, now.Add(taskStatsTTL).Unix(), int64(math.MaxInt64), f,
		now.AddDate(0, 0, -90).Unix(), asynqTaskKey(t.Queue, "")).Err()
	if err != nil {
		return fmt.Errorf("store: end task %s as %q: %w", t.ID, state, err)
	}
	return nil
}

// luaRequeue is asynq's requeue of a task its worker stopped: pending
// again, at the head of its queue.
var luaRequeue = redis.NewScript(`
if redis.call('LREM', KEYS[1], 0, ARGV[1]) == 0 then return redis.error_reply('NOT FOUND') end
if redis.call('ZREM', KEYS[2], ARGV[1]) == 0 then return redis.error_reply('NOT FOUND') end
redis.call('RPUSH', KEYS[3], ARGV[1])
redis.call('HSET', KEYS[4], 'state', 'pending')
return 'OK'`)

// RequeueTask puts a claimed task back on its queue unrun (its worker
// stops), as asynq does with the tasks a shutdown cuts short.
func (s *Store) RequeueTask(ctx context.Context, t *ClaimedTask) error {
	keys := []string{asynqKey(t.Queue, "active"), asynqKey(t.Queue, "lease"), asynqPendingKey(t.Queue), asynqTaskKey(t.Queue, t.ID)}
	if err := luaRequeue.Run(ctx, s.rdb, keys, t.ID).Err(); err != nil {
		return fmt.Errorf("store: requeue task %s: %w", t.ID, err)
	}
	return nil
}

// decodeTaskMessage reads the fields of asynq's TaskMessage a claimed
// task needs (asynq.proto: 1 type, 2 payload, 3 id, 4 queue, 5 retry,
// 6 retried, 8 timeout, 9 deadline, 10 unique key, 12 retention, 14
// group key).
func decodeTaskMessage(b []byte) (*ClaimedTask, error) {
	t := &ClaimedTask{msg: b}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, fmt.Errorf("asynq message: %w", protowire.ParseError(n))
		}
		b = b[n:]
		switch typ {
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, fmt.Errorf("asynq message field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
			switch num {
			case 5:
				t.Retry = int(int32(v))
			case 6:
				t.Retried = int(int32(v))
			case 8:
				t.Timeout = int64(v)
			case 9:
				t.Deadline = int64(v)
			case 12:
				t.Retention = int64(v)
			}
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, fmt.Errorf("asynq message field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
			switch num {
			case 1:
				t.Type = string(v)
			case 2:
				t.Payload = append([]byte(nil), v...)
			case 3:
				t.ID = string(v)
			case 4:
				t.Queue = string(v)
			case 10, 14:
				t.unique = t.unique || len(v) > 0
			}
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return nil, fmt.Errorf("asynq message field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
		}
	}
	return t, nil
}

// msgField is a varint (n, v) or string (n, s) field of asynq's message.
type msgField struct {
	n protowire.Number
	v int64
	s string
}

// editMessage is msg with fields fs set: their old values dropped, the new
// ones appended (proto3 leaves zero values out).
func editMessage(msg []byte, fs ...msgField) []byte {
	drop := func(num protowire.Number) bool {
		for _, f := range fs {
			if f.n == num {
				return true
			}
		}
		return false
	}
	out := make([]byte, 0, len(msg)+32)
	for b := msg; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			break // decoded when claimed: cannot happen
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			break
		}
		if !drop(num) {
			out = append(out, b[:n+m]...)
		}
		b = b[n+m:]
	}
	for _, f := range fs {
		switch {
		case f.s != "":
			out = appendBytesField(out, f.n, []byte(f.s))
		case f.v != 0:
			out = protowire.AppendTag(out, f.n, protowire.VarintType)
			out = protowire.AppendVarint(out, uint64(f.v))
		}
	}
	return out
}
