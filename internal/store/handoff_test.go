package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/store"
)

// handoffCases are the ways a task ends, each with the error its handler
// returns.
var handoffCases = []struct {
	queue     string
	err       error
	retention time.Duration
	retry     int // its max retries
	retried   int // its retries before this run
}{
	{queue: "completed", retention: time.Hour},
	{queue: "done"},
	{queue: "retried", err: errors.New("upstream 503"), retry: 5, retried: 1},
	{queue: "busy", err: errors.New("not a failure"), retry: 5},
	{queue: "lastretry", err: errors.New("upstream 503 again"), retry: 3, retried: 3},
	{queue: "skipped", err: fmt.Errorf("bad request: %w", asynq.SkipRetry), retry: 5},
}

// endState is what asynq keeps of a task that ended in queue q: its
// state, retry counts, error and times (set or not), the sets holding
// it, and the queue's processed and failed counts.
func endState(t *testing.T, rdb *redis.Client, q, id string) string {
	t.Helper()
	ctx := context.Background()
	sets := ""
	for _, s := range []string{"pending", "active", "lease", "scheduled", "retry", "archived", "completed"} {
		in := false
		if s == "pending" || s == "active" {
			ids, _ := rdb.LRange(ctx, "asynq:{"+q+"}:"+s, 0, -1).Result()
			for _, v := range ids {
				in = in || v == id
			}
		} else {
			_, err := rdb.ZScore(ctx, "asynq:{"+q+"}:"+s, id).Result()
			in = err == nil
		}
		if in {
			sets += s + " "
		}
	}
	stats := ""
	for _, k := range []string{"processed", "failed"} {
		total, _ := rdb.Get(ctx, "asynq:{"+q+"}:"+k).Result()
		day, _ := rdb.Get(ctx, "asynq:{"+q+"}:"+k+":"+time.Now().UTC().Format("2006-01-02")).Result()
		ttl, _ := rdb.TTL(ctx, "asynq:{"+q+"}:"+k+":"+time.Now().UTC().Format("2006-01-02")).Result()
		stats += fmt.Sprintf("%s=%s/%s ttl>80d=%v ", k, total, day, ttl > 80*24*time.Hour)
	}
	info, err := asynq.NewInspectorFromRedisClient(rdb).GetTaskInfo(q, id)
	if errors.Is(err, asynq.ErrTaskNotFound) {
		return "deleted; sets " + sets + "; " + stats
	}
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s retried %d/%d err %q failed-at %v completed-at %v payload %s; sets %s; %s", info.State, info.Retried, info.MaxRetry,
		info.LastErr, !info.LastFailedAt.IsZero(), !info.CompletedAt.IsZero(), info.Payload, sets, stats)
}

// A task a worker claims itself and ends through the store is left in
// Redis exactly as asynq's processor leaves the same task with the same
// result: completed (or deleted) with its retention, retried with its
// count raised only for a failure, archived on its last retry or a
// SkipRetry, with the queue's processed and failed counts.
func TestHandedOffTasksEndAsAsynqEndsThem(t *testing.T) {
	ctx := context.Background()
	viaAsynq, viaStore := asynqAndStore(t)
	queues := map[string]int{}
	errs := map[string]error{}
	for _, c := range handoffCases {
		queues[c.queue] = 1
		errs[c.queue] = c.err
	}
	enqueue := func(rdb *redis.Client, c int) {
		hc := handoffCases[c]
		task := asynq.NewTask("agentq:step", []byte(`{"wf":"w","step":"`+hc.queue+`"}`), asynq.TaskID("t-"+hc.queue), asynq.Queue(hc.queue),
			asynq.MaxRetry(hc.retry), asynq.Timeout(time.Minute), asynq.Retention(hc.retention))
		if _, err := asynq.NewClientFromRedisClient(rdb).EnqueueContext(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	for i := range handoffCases {
		enqueue(viaAsynq, i)
		enqueue(viaStore, i)
	}
	// a retried count: what earlier failed runs leave
	for _, rdb := range []*redis.Client{viaAsynq, viaStore} {
		for _, c := range handoffCases {
			if c.retried > 0 {
				raiseRetried(t, rdb, c.queue, "t-"+c.queue, c.retried)
			}
		}
	}

	srv := asynq.NewServerFromRedisClient(viaAsynq, asynq.Config{Concurrency: len(queues), Queues: queues, TaskCheckInterval: 10 * time.Millisecond,
		LogLevel: asynq.FatalLevel, RetryDelayFunc: func(int, error, *asynq.Task) time.Duration { return time.Hour },
		IsFailure: func(err error) bool { return err.Error() != "not a failure" }})
	if err := srv.Start(asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
		q, _ := asynq.GetQueueName(ctx)
		return errs[q]
	})); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()

	s := store.New(viaStore, time.Hour, nil)
	for _, c := range handoffCases {
		id := "t-" + c.queue
		claimed, err := s.ClaimTask(ctx, c.queue, id, 1, time.Now().Add(store.TaskLease))
		if err != nil || claimed == nil {
			t.Fatalf("claim %s: %v, %v", id, claimed, err)
		}
		if again, err := s.ClaimTask(ctx, c.queue, id, 1, time.Now().Add(store.TaskLease)); again != nil || err != nil {
			t.Fatalf("a claimed task was claimed again: %v, %v", again, err)
		}
		if info, _ := asynq.NewInspectorFromRedisClient(viaStore).GetTaskInfo(c.queue, id); info.State != asynq.TaskStateActive {
			t.Fatalf("claimed task %s is %s", id, info.State)
		}
		switch {
		case c.err == nil:
			err = s.CompleteTask(ctx, claimed)
		case claimed.Retried >= claimed.Retry || errors.Is(c.err, asynq.SkipRetry):
			err = s.ArchiveTask(ctx, claimed, c.err.Error())
		default:
			err = s.RetryTask(ctx, claimed, time.Now().Add(time.Hour), c.err.Error(), c.err.Error() != "not a failure")
		}
		if err != nil {
			t.Fatal(err)
		}
		poll.Until(t, 10*time.Second, func() (bool, string) {
			want, got := endState(t, viaAsynq, c.queue, id), endState(t, viaStore, c.queue, id)
			return got == want, fmt.Sprintf("%s: the store left\n  %s\nasynq left\n  %s", c.queue, got, want)
		})
	}
}

// A paused queue's task is not claimed; nor is one no longer pending.
func TestAPausedQueuesTaskIsNotClaimed(t *testing.T) {
	ctx := context.Background()
	_, rdb := asynqAndStore(t)
	if _, err := asynq.NewClientFromRedisClient(rdb).EnqueueContext(ctx, asynq.NewTask("agentq:step", []byte("{}"), asynq.TaskID("t1"))); err != nil {
		t.Fatal(err)
	}
	insp := asynq.NewInspectorFromRedisClient(rdb)
	if err := insp.PauseQueue("default"); err != nil {
		t.Fatal(err)
	}
	s := store.New(rdb, time.Hour, nil)
	if c, err := s.ClaimTask(ctx, "default", "t1", 1, time.Now().Add(time.Minute)); c != nil || err != nil {
		t.Fatalf("a paused queue's task was claimed: %v, %v", c, err)
	}
	if err := insp.UnpauseQueue("default"); err != nil {
		t.Fatal(err)
	}
	c, err := s.ClaimTask(ctx, "default", "t1", 1, time.Now().Add(time.Minute))
	if c == nil || err != nil {
		t.Fatalf("claim after resume: %v, %v", c, err)
	}
	if err := s.RequeueTask(ctx, c); err != nil {
		t.Fatal(err)
	}
	if info, _ := insp.GetTaskInfo("default", "t1"); info.State != asynq.TaskStatePending {
		t.Fatalf("a requeued task is %s", info.State)
	}
	if c, err := s.ClaimTask(ctx, "default", "nope", 1, time.Now().Add(time.Minute)); c != nil || err != nil {
		t.Fatalf("a task never enqueued was claimed: %v, %v", c, err)
	}
	// a task others were waiting before is left to asynq's order
	for _, id := range []string{"older", "t1"} {
		if id == "t1" {
			if err := insp.DeleteTask("default", "t1"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := asynq.NewClientFromRedisClient(rdb).EnqueueContext(ctx, asynq.NewTask("agentq:step", []byte("{}"), asynq.TaskID(id))); err != nil {
			t.Fatal(err)
		}
	}
	if c, err := s.ClaimTask(ctx, "default", "t1", 1, time.Now().Add(time.Minute)); c != nil || err != nil {
		t.Fatalf("a task was claimed ahead of one waiting before it: %v, %v", c, err)
	}
	if c, err := s.ClaimTask(ctx, "default", "t1", 2, time.Now().Add(time.Minute)); c == nil || err != nil {
		t.Fatalf("a task enqueued with another by the same settle was not claimed: %v, %v", c, err)
	}
}

// raiseRetried sets task id's retried count to n in its message (a
// proto3 field given again overrides the first).
func raiseRetried(t *testing.T, rdb *redis.Client, q, id string, n int) {
	t.Helper()
	ctx := context.Background()
	key := "asynq:{" + q + "}:t:" + id
	msg, err := rdb.HGet(ctx, key, "msg").Bytes()
	if err != nil {
		t.Fatal(err)
	}
	msg = protowire.AppendVarint(protowire.AppendTag(msg, 6, protowire.VarintType), uint64(n))
	if err := rdb.HSet(ctx, key, "msg", msg).Err(); err != nil {
		t.Fatal(err)
	}
}
