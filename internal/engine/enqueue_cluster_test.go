package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/internal/worker"
)

// On a Redis Cluster with redis.durability, the tasks a submit or a
// settle makes ready are confirmed on the primary of their queue's slot,
// as the write that made them ready is on the workflow's: with the queue
// primary's replica cut off (the workflow's in sync), the submit is told
// not confirmed, and so is the settle that enqueues the next step (its
// task is not acknowledged). The tasks are written all the same, so the
// workflow runs to its end on the primaries; once the replica is back,
// the first step's task comes back and is confirmed. A rerun's task is
// confirmed the same way.
func TestOnAClusterTheTasksAWriteMakesReadyAreConfirmedOnTheirQueuesPrimary(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a four-node Redis Cluster")
	}
	t.Parallel()
	ctx := t.Context()
	nodes := queueClusterNodes(t, "default", 2)
	addrs, queueReplica := []string{nodes[0].Addr(), nodes[1].Addr()}, nodes[2]
	e := testenv.Start(t, testenv.Options{NoWorker: true,
		Durability: &config.Durability{Replicas: 1, Timeout: config.Duration(time.Second)}})
	cfg := e.Config
	cfg.Redis.Addr, cfg.Redis.DB, cfg.Redis.Cluster = addrs[0], 0, addrs
	rdb, err := app.Redis(ctx, cfg.Redis)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	cc := rdb.(*redis.ClusterClient)
	poll.Until(t, 20*time.Second, func() (bool, string) {
		err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.Ping(ctx).Err() })
		return err == nil, fmt.Sprintf("the cluster's primaries: %v", err)
	})

	events := make(chan engine.StepEvent, 256)
	o := e.WorkerOptions(slog.New(slog.DiscardHandler))
	o.Config, o.Redis = cfg, rdb
	o.Events = func(ev engine.StepEvent) {
		select {
		case events <- ev:
		default:
		}
	}
	wctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	o.Ready = func() { close(ready) }
	go func() { done <- worker.Run(wctx, o) }()
	t.Cleanup(func() { cancel(); <-done }) // before rdb closes
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("worker on the cluster: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not start within 30s")
	}
	co := app.ClientOptions(cfg)
	co.SkipWorkerCheck = true
	client := producer.NewClient(rdb, co)
	wspec, err := client.Parse("two.yaml", []byte("name: two\nsteps:\n  - { id: s, route: solo, prompt: \"hello\" }\n  - { id: after, route: solo, prompt: \"again\", depends_on: [s] }\n"))
	if err != nil {
		t.Fatal(err)
	}

	queueReplica.Freeze()
	thawed := false
	defer func() {
		if !thawed {
			queueReplica.Thaw()
		}
	}()
	sub, err := client.SubmitWorkflow(ctx, wspec)
	if !errors.Is(err, producer.ErrNotConfirmed) {
		t.Fatalf("submit with the queue's replica cut off: %v, want ErrNotConfirmed (the roots' tasks)", err)
	}
	if wfSlot, qSlot := keySlot(t, cc, store.Prefix+"{wf:"+sub.ID+"}:wf"), keySlot(t, cc, "asynq:{default}:pending"); wfSlot == qSlot {
		t.Fatalf("workflow %s is in the queue's slot %d: the test needs them on two primaries", sub.ID, qSlot)
	}

	// the first step's settle is confirmed on the workflow's primary; the
	// next step's task on the queue's is not: the settle is not acknowledged
	timeout := time.After(15 * time.Second)
	for unconfirmed := false; !unconfirmed; {
		select {
		case ev := <-events:
			if ev.Workflow == sub.ID && ev.Step == "s" && ev.State == store.StepDone {
				t.Fatalf("step s reported done while the task it made ready is not confirmed")
			}
			unconfirmed = ev.Workflow == sub.ID && ev.Step == "s" && ev.State == "unconfirmed" && errors.Is(ev.Err, store.ErrNotConfirmed) &&
				strings.Contains(ev.Err.Error(), flow.StepTaskID(sub.ID, "after", 0))
		case <-timeout:
			t.Fatal("no unconfirmed settle of step s in 15s with the queue's replica cut off")
		}
	}
	// written all the same: the workflow goes on on the primaries
	poll.Until(t, 15*time.Second, func() (bool, string) {
		wf, err := client.Status(ctx, sub.ID)
		return err == nil && wf.State == store.StateCompleted, fmt.Sprintf("workflow with the queue's replica cut off: %+v %v", wf, err)
	})

	queueReplica.Thaw()
	thawed = true
	timeout = time.After(15 * time.Second)
	for confirmed := false; !confirmed; {
		select {
		case ev := <-events:
			confirmed = ev.Workflow == sub.ID && ev.Step == "s" && ev.State == store.StepDone
		case <-timeout:
			t.Fatal("step s not confirmed within 15s of the queue's replica coming back")
		}
	}

	// a rerun's tasks too
	queueReplica.Freeze()
	thawed = false
	if _, err := client.Rerun(ctx, sub.ID, "after"); !errors.Is(err, producer.ErrNotConfirmed) || !strings.Contains(err.Error(), flow.StepTaskID(sub.ID, "after", 1)) {
		t.Fatalf("rerun with the queue's replica cut off: %v, want ErrNotConfirmed for the task of step after", err)
	}
}

// keySlot is key's hash slot.
func keySlot(t *testing.T, c *redis.ClusterClient, key string) int64 {
	t.Helper()
	s, err := c.ClusterKeySlot(t.Context(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
