package store_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/store"
)

// dequeuedState is what asynq keeps of task id of queue q as a dequeue
// leaves it: its hash's fields but the message and its lists and sets;
// and, apart, its lease's end in seconds from now (0 for none).
func dequeuedState(t *testing.T, rdb *redis.Client, q, id string) (string, float64) {
	t.Helper()
	ctx := context.Background()
	h, err := rdb.HGetAll(ctx, "asynq:{"+q+"}:t:"+id).Result()
	if err != nil {
		t.Fatal(err)
	}
	var fields []string
	for _, f := range []string{"state", "pending_since"} {
		if v, ok := h[f]; ok {
			if f == "pending_since" {
				v = "set"
			}
			fields = append(fields, f+"="+v)
		}
	}
	var sets []string
	for _, l := range []string{"pending", "active"} {
		ids, _ := rdb.LRange(ctx, "asynq:{"+q+"}:"+l, 0, -1).Result()
		for _, v := range ids {
			if v == id {
				sets = append(sets, l)
			}
		}
	}
	lease := 0.0
	if s, err := rdb.ZScore(ctx, "asynq:{"+q+"}:lease", id).Result(); err == nil {
		lease = s - float64(time.Now().Unix())
	}
	return strings.Join(fields, " ") + "; in " + strings.Join(sets, ","), lease
}

// ClaimNext takes a queue's oldest task as asynq's dequeue does (the same
// task, left in the same state, under a lease as long as asynq's), one at
// a time, and nothing from an empty or a paused queue.
func TestClaimNextTakesTheOldestTaskAsAsynqDequeues(t *testing.T) {
	ctx := context.Background()
	viaAsynq, viaStore := asynqAndStore(t)
	ids := []string{"t1", "t2", "t3"}
	for _, rdb := range []*redis.Client{viaAsynq, viaStore} {
		for _, id := range ids {
			task := asynq.NewTask("agentq:step", []byte(`{"wf":"w","step":"`+id+`"}`), asynq.TaskID(id), asynq.Timeout(time.Minute))
			if _, err := asynq.NewClientFromRedisClient(rdb).EnqueueContext(ctx, task); err != nil {
				t.Fatal(err)
			}
		}
	}
	took := make(chan string, 1)
	hold := make(chan struct{})
	srv := asynq.NewServerFromRedisClient(viaAsynq, asynq.Config{Concurrency: 1, Queues: map[string]int{"default": 1}, TaskCheckInterval: 10 * time.Millisecond,
		LogLevel: asynq.FatalLevel, ShutdownTimeout: time.Second})
	if err := srv.Start(asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
		id, _ := asynq.GetTaskID(ctx)
		took <- id
		<-hold
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	defer close(hold)
	var asynqTook string
	select {
	case asynqTook = <-took:
	case <-time.After(10 * time.Second):
		t.Fatal("asynq took no task")
	}

	s := store.New(viaStore, time.Hour, nil)
	c, err := s.ClaimNext(ctx, "default", time.Now().Add(store.TaskLease))
	if err != nil || c == nil {
		t.Fatalf("claim next: %v, %v", c, err)
	}
	if c.ID != asynqTook || c.Type != "agentq:step" || c.Queue != "default" || c.Timeout != 60 || string(c.Payload) != `{"wf":"w","step":"t1"}` {
		t.Fatalf("claimed %+v; asynq took %s", c, asynqTook)
	}
	for _, id := range ids {
		want, wantLease := dequeuedState(t, viaAsynq, "default", id)
		got, gotLease := dequeuedState(t, viaStore, "default", id)
		// Leases are whole seconds, taken a moment apart: one second's
		// difference is the clock ticking between the two claims.
		if got != want || math.Abs(gotLease-wantLease) > 1 || (gotLease == 0) != (wantLease == 0) {
			t.Fatalf("%s: the store left %q with a lease in %.0fs, asynq %q in %.0fs", id, got, gotLease, want, wantLease)
		}
	}
	insp := asynq.NewInspectorFromRedisClient(viaStore)
	if err := insp.PauseQueue("default"); err != nil {
		t.Fatal(err)
	}
	if c, err := s.ClaimNext(ctx, "default", time.Now().Add(store.TaskLease)); c != nil || err != nil {
		t.Fatalf("a paused queue's task was claimed: %v, %v", c, err)
	}
	if err := insp.UnpauseQueue("default"); err != nil {
		t.Fatal(err)
	}
	for _, want := range ids[1:] {
		if c, err := s.ClaimNext(ctx, "default", time.Now().Add(store.TaskLease)); err != nil || c == nil || c.ID != want {
			t.Fatalf("claim next: %v, %v (want %s)", c, err, want)
		}
	}
	if c, err := s.ClaimNext(ctx, "default", time.Now().Add(store.TaskLease)); c != nil || err != nil {
		t.Fatalf("an empty queue gave %v, %v", c, err)
	}
}
