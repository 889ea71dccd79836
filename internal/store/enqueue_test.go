package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/store"
)

// EnqueueTask writes a task exactly as asynq v0.26's client does (the
// same message bytes, hash fields, pending list and set of queues), on a
// store that does not enqueue tasks in its own writes as on one that
// does; the same id enqueued again writes nothing.
func TestEnqueueTaskWritesWhatAsynqWrites(t *testing.T) {
	ctx := t.Context()
	viaAsynq, viaStore := asynqAndStore(t)
	client := asynq.NewClientFromRedisClient(viaAsynq)
	for _, qt := range queuedTasks {
		if _, err := client.EnqueueContext(ctx, asynqTaskOf(qt)); err != nil {
			t.Fatal(err)
		}
	}
	s := store.New(viaStore, time.Hour, nil)
	if err := s.EnqueueTask(ctx, queuedTasks[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.EnqueueTasks(ctx, queuedTasks[1:]...); err != nil {
		t.Fatal(err)
	}
	want, got := asynqState(t, viaAsynq, "default", "critical"), asynqState(t, viaStore, "default", "critical")
	if got != want {
		t.Fatalf("the store's tasks:\n%s\nasynq's:\n%s", got, want)
	}

	// an id that exists is left alone, as asynq's client leaves it
	again := queuedTasks[2]
	again.Type, again.Payload = "other", []byte("x")
	if err := s.EnqueueTask(ctx, again); err != nil {
		t.Fatalf("enqueue an existing id again: %v, want nil (asynq's ErrTaskIDConflict is success)", err)
	}
	if got := asynqState(t, viaStore, "default", "critical"); got != want {
		t.Fatalf("after enqueueing an existing id again:\n%s\nwant:\n%s", got, want)
	}
	info, err := asynq.NewInspectorFromRedisClient(viaStore).GetTaskInfo("critical", "wf1:b@2")
	if err != nil || info.State != asynq.TaskStatePending || info.Timeout != 90*time.Second || string(info.Payload) != string(queuedTasks[1].Payload) {
		t.Fatalf("asynq reads the store's task as %+v (%v)", info, err)
	}
}

// With durability on, EnqueueTask confirms the task on its queue's
// primary: a replica that does not take the stream leaves it not
// confirmed, written all the same; a task that exists already is
// confirmed too (it writes nothing, but is reported only once the replica
// has it). Of several queues' tasks, those after one not confirmed are
// written without waiting again.
func TestEnqueueTaskIsConfirmedByTheReplicaOrReportedNotConfirmed(t *testing.T) {
	s, primary, replica := replicatedStore(t)
	ctx := t.Context()
	if !s.ConfirmsTasks() {
		t.Fatal("a store with durability on does not confirm the tasks its callers enqueue")
	}
	if err := s.EnqueueTask(ctx, queuedTasks[0]); err != nil {
		t.Fatalf("enqueue with the replica in sync: %v", err)
	}

	replica.Freeze()
	t.Cleanup(replica.Thaw)
	err := s.EnqueueTask(ctx, queuedTasks[2])
	var nc *store.NotConfirmedError
	if !errors.Is(err, store.ErrNotConfirmed) || !errors.As(err, &nc) || nc.Replicas != 1 || nc.Acked != 0 {
		t.Fatalf("enqueue with the replica frozen: %v, want a NotConfirmedError (1 asked, 0 acked)", err)
	}
	onPrimary := redis.NewClient(&redis.Options{Addr: primary.Addr()})
	t.Cleanup(func() { onPrimary.Close() })
	insp := asynq.NewInspectorFromRedisClient(onPrimary)
	if info, err := insp.GetTaskInfo("default", queuedTasks[2].ID); err != nil || info.State != asynq.TaskStatePending {
		t.Fatalf("the task not confirmed is not pending on the primary: %+v (%v)", info, err)
	}
	if err := s.EnqueueTask(ctx, queuedTasks[2]); !errors.Is(err, store.ErrNotConfirmed) {
		t.Fatalf("the same task again with the replica still frozen: %v, want ErrNotConfirmed", err)
	}

	s.SetDurability(store.Durability{Replicas: 1, Timeout: time.Second})
	start := time.Now()
	err = s.EnqueueTasks(ctx, queuedTasks[1], queuedTasks[3]) // two queues
	if took := time.Since(start); !errors.Is(err, store.ErrNotConfirmed) || took >= 1900*time.Millisecond {
		t.Fatalf("two queues' tasks with the replica frozen: %v after %s, want ErrNotConfirmed after one wait of 1s", err, took)
	}
	for _, qt := range queuedTasks[1:] {
		if _, err := insp.GetTaskInfo(qt.Queue, qt.ID); err != nil {
			t.Fatalf("task %s not written: %v", qt.ID, err)
		}
	}

	replica.Thaw()
	if err := s.EnqueueTask(ctx, queuedTasks[2]); err != nil {
		t.Fatalf("the task again once the replica is back: %v, want it confirmed", err)
	}
}
