package engine_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/tasks"
)

// Canceling in the middle of a map deletes the instances waiting in the
// queue (each one's task is gone, not run as a no-op and kept as
// completed) and starts no other one.
func TestCancelMidMapDeletesPendingInstances(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	started := map[int]bool{}
	e := testenv.Start(t, testenv.Options{NoWorker: true, Steps: map[string]engine.StepFunc{
		"hold": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			mu.Lock()
			started[s.Index()] = true
			mu.Unlock()
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil, ctx.Err()
		}}})
	nStarted := func() int { mu.Lock(); defer mu.Unlock(); return len(started) }
	id := e.Submit(t, e.Spec(`name: cancel
input: { items: [`+strings.TrimSuffix(strings.Repeat(`1, `, 50), ", ")+`] }
steps:
  - { id: m, for_each: "{{ .Input.items }}", max_parallel: 30, run: hold }
`))
	e.Config.Worker.Concurrency = 4 // most of the window waits in the queue
	e.StartWorker(t)
	insp := asynq.NewInspectorFromRedisClient(e.Redis)
	poll.Until(t, 20*time.Second, func() (bool, string) {
		n := nStarted()
		return n >= 4, fmt.Sprintf("%d instances started", n)
	})
	if _, err := e.Client.Cancel(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	// every released instance that did not start has no task left in
	// asynq (the started ones return through their canceled context)
	w, err := e.Store.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	m := w.Steps[0].Map
	if m == nil || m.Started != 30 {
		t.Fatalf("map counts at the cancel %+v, want the window of 30 released", m)
	}
	mu.Lock()
	ran := maps.Clone(started)
	mu.Unlock()
	if len(ran) != 4 {
		t.Fatalf("%d instances started by the cancel, want the worker's 4", len(ran))
	}
	for n := range m.Started {
		if ran[n] {
			continue
		}
		if info, err := insp.GetTaskInfo("default", tasks.TaskID(id, fmt.Sprintf("m[%d]", n))); err == nil {
			t.Errorf("instance %d never started, but its task is still there after the cancel, %s", n, info.State)
		} else if !errors.Is(err, asynq.ErrTaskNotFound) {
			t.Errorf("instance %d: %v", n, err)
		}
	}
	close(release)
	wf := e.Wait(t, id, 10*time.Second, store.StateCanceled)
	if wf.State != store.StateCanceled {
		t.Fatalf("state %s", wf.State)
	}
	checkInstancesClosed(t, e, id, "m", m.Started)
	// Only the four instances that were running may have a task left:
	// asynq retries a task whose context it canceled whatever the handler
	// returns, so each may come back once, and must end as a no-op (the
	// workflow is canceled: Begin refuses it, the step function is not
	// called again). Any other task would be a waiting instance the cancel
	// missed. Wait for the queue to drain of them.
	running := map[string]bool{}
	for n := range ran {
		running[tasks.TaskID(id, fmt.Sprintf("m[%d]", n))] = true
	}
	poll.Until(t, 20*time.Second, func() (bool, string) {
		var left []string
		for _, list := range []func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){insp.ListPendingTasks, insp.ListRetryTasks, insp.ListActiveTasks} {
			ts, err := list("default", asynq.PageSize(100))
			if err != nil && !errors.Is(err, asynq.ErrQueueNotFound) {
				t.Fatal(err)
			}
			for _, ti := range ts {
				if !running[ti.ID] {
					t.Fatalf("task %s (%s) left after the cancel: not one of the instances that were running", ti.ID, ti.State)
				}
				left = append(left, ti.ID+" "+ti.State.String())
			}
		}
		return len(left) == 0, fmt.Sprintf("tasks left: %v", left)
	})
	if n := nStarted(); n != 4 {
		t.Errorf("%d instances started: only the 4 running at the cancel should have", n)
	}
	if w, _ := e.Store.Get(t.Context(), id); w.Steps[0].Map.Started != 30 {
		t.Errorf("map counts after cancel %+v: the cancel released more", w.Steps[0].Map)
	}
}

// Canceling a wide map looks up only the instances still in flight: with
// 590 of 600 done, the cancel costs Redis tens of commands, not one
// lookup per instance (about 1,800 before), and the 10 running ones stop.
func TestCancelOfAWideMapLooksUpOnlyWhatRuns(t *testing.T) {
	var holding, stopped atomic.Int32
	e := testenv.Start(t, testenv.Options{NoWorker: true, Steps: map[string]engine.StepFunc{
		"hold": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			if s.Index() < 590 {
				return s.Index(), nil
			}
			holding.Add(1)
			<-ctx.Done() // the last ten run until the cancel stops them
			stopped.Add(1)
			return nil, ctx.Err()
		}}})
	e.Config.Worker.Concurrency = 16 // room for the ten that hold and more
	e.StartWorker(t)
	items := make([]string, 600)
	for i := range items {
		items[i] = strconv.Itoa(i)
	}
	id := e.Submit(t, e.Spec(`name: wide-cancel
input: { items: [`+strings.Join(items, ", ")+`] }
steps:
  - { id: m, for_each: "{{ .Input.items }}", max_parallel: 10, max_items: 600, run: hold }
`))
	poll.Until(t, 60*time.Second, func() (bool, string) {
		c, err := e.Store.Counts(t.Context(), id, "m")
		return err == nil && c != nil && c.Started == 600 && c.Settled == 590 && holding.Load() == 10,
			fmt.Sprintf("counts %+v (%v), %d of the last ten running", c, err, holding.Load())
	})
	rdb := redis.NewClient(e.DB.Options())
	t.Cleanup(func() { rdb.Close() })
	cs := &commandSizes{}
	rdb.AddHook(cs)
	c := producer.NewClient(rdb, producer.ClientOptions{Limits: app.ClientOptions(e.Config).Limits, Retention: e.Config.Retention.D(), Routes: e.Config.RouteNames(), SkipWorkerCheck: true})
	if state, err := c.Cancel(t.Context(), id); err != nil || state != store.StateCanceled {
		t.Fatalf("cancel: %s %v", state, err)
	}
	if n := cs.small.Load() + cs.large.Load(); n > 150 {
		t.Errorf("the cancel sent %d commands for 10 instances in flight", n)
	}
	poll.Until(t, 20*time.Second, func() (bool, string) {
		return stopped.Load() == 10, fmt.Sprintf("%d of the 10 running instances stopped", stopped.Load())
	})
}

// checkInstancesClosed fails unless every released instance of map step of
// an ended workflow is done, dead or canceled, or never began (no record:
// pending); none is left running or queued until retention.
func checkInstancesClosed(t *testing.T, e *testenv.Env, id, step string, released int) {
	t.Helper()
	ps, err := e.Store.InstanceProgress(t.Context(), id, step, 0, released)
	if err != nil {
		t.Fatal(err)
	}
	for n, p := range ps {
		if p.State == store.StepRunning || p.State == store.StepQueued {
			t.Errorf("instance %d of %s is %s after the workflow ended", n, step, p.State)
		}
	}
}

// A map whose workflow's deadline passes: its released instances end
// canceled with the workflow, none left running.
func TestTimedOutMapClosesItsInstances(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{
		"hold": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}}})
	wspec := e.Spec(`name: deadline
input: { items: [` + strings.TrimSuffix(strings.Repeat(`1, `, 30), ", ") + `] }
steps:
  - { id: m, for_each: "{{ .Input.items }}", max_parallel: 6, run: hold }
`)
	id, err := e.Client.Submit(t.Context(), wspec, producer.WithDeadline(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	wf := e.Wait(t, id, 20*time.Second, store.StateTimedOut)
	if wf.Steps[0].Map == nil || wf.Steps[0].Map.Started != 6 {
		t.Fatalf("map %+v, want the window of 6 released", wf.Steps[0].Map)
	}
	checkInstancesClosed(t, e, id, "m", wf.Steps[0].Map.Started)
}
