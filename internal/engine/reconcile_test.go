package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/internal/worker"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/tasks"
)

// fastReconciler makes a worker's reconciler look every 100ms at what
// looked stranded for more than half a second.
func fastReconciler(o *worker.Options) {
	o.ReconcileInterval, o.ReconcileGrace = 100*time.Millisecond, 500*time.Millisecond
}

// SIGKILL a worker process while its step's only attempt (max_retries: 0)
// waits for the provider: asynq's recoverer archives the task once its
// lease has expired, without calling the error handler; the reconciler of
// the surviving worker settles the step dead with the reason, and the
// workflow is blocked.
func TestSIGKILLOnTheLastAttemptEndsDeadThroughTheReconciler(t *testing.T) {
	if testing.Short() {
		t.Skip("waits about a minute for asynq's recoverer to archive the killed worker's task")
	}
	t.Parallel()
	e := testenv.Start(t, testenv.Options{NoWorker: true, Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Name: "the first call hangs", Requests: 1, Fault: &chaosllm.Fault{Kind: chaosllm.KindHang}}, {Name: "fine"}}}})
	id := e.Submit(t, e.Spec(step("solo", ", timeout: 10s, max_retries: 0")))
	p := startWorkerProcess(t, e, 1)
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return e.Chaos.Snapshot().Count("openai", "", "hang") > 0, "no call reached chaosllm"
	})
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	killed := time.Now()
	if wf, _ := e.Store.Get(context.Background(), id); wf.Steps[0].State != store.StepRunning {
		t.Fatalf("after the kill: %+v (want the step running)", wf.Steps[0])
	}
	url := runWorker(t, e, nil, fastReconciler)
	wf := e.Wait(t, id, 150*time.Second, store.StateBlocked, store.StateCompleted)
	t.Logf("settled %.1fs after the SIGKILL", time.Since(killed).Seconds())
	s := wf.Steps[0]
	if wf.State != store.StateBlocked || s.State != store.StepDead || !strings.HasPrefix(s.Error, "lease_expired: task archived by asynq without a result") {
		t.Fatalf("workflow %s, step %+v; want blocked, dead with lease_expired", wf.State, s)
	}
	if info := archived(t, e, tasks.TaskID(id, "s")); !strings.Contains(info.LastErr, "lease expired") {
		t.Fatalf("archived task: %+v", info)
	}
	scrapeWhen(t, url, map[string]float64{`agentq_reconciled_steps_total{reason="lease_expired"}`: 1, `agentq_dead_letters_total{class="lease_expired"}`: 1})
	// a dead letter like any other: requeued, the workflow completes
	if err := e.Client.Requeue(context.Background(), tasks.TaskID(id, "s")); err != nil {
		t.Fatal(err)
	}
	e.Wait(t, id, 10*time.Second, store.StateCompleted)
}

// Three roots whose tasks asynq lost or ended before they ran: one never
// reached asynq (deleted), one was archived, one was marked running by a
// worker that vanished with its task. The reconciler enqueues the first
// again (it completes), settles the others dead with their reasons (a
// dead letter to requeue is put in place of the vanished task), and the
// workflow is blocked until that dead letter is requeued.
func TestReconcilerSettlesLostAndArchivedSteps(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	id := e.Submit(t, e.Spec(`
name: three
defaults: { route: solo, max_retries: 0 }
steps:
  - { id: lost, prompt: "lost" }
  - { id: archived, prompt: "archived" }
  - { id: vanished, prompt: "vanished" }
`))
	insp := asynq.NewInspectorFromRedisClient(e.Redis)
	ctx := context.Background()
	if err := insp.DeleteTask("default", tasks.TaskID(id, "lost")); err != nil {
		t.Fatal(err)
	}
	if err := insp.ArchiveTask("default", tasks.TaskID(id, "archived")); err != nil {
		t.Fatal(err)
	}
	if err := insp.DeleteTask("default", tasks.TaskID(id, "vanished")); err != nil {
		t.Fatal(err)
	}
	// what a worker that began the step and then vanished with its task leaves
	if _, err := e.Store.Begin(ctx, id, "vanished", tasks.TaskID(id, "vanished"), 0, time.Millisecond, nil); err != nil {
		t.Fatal(err)
	}
	url := runWorker(t, e, nil, fastReconciler)
	wf := e.Wait(t, id, 20*time.Second, store.StateBlocked)
	poll.Until(t, 20*time.Second, func() (bool, string) {
		if wf.Steps[0].State == store.StepDone && wf.Steps[1].State == store.StepDead && wf.Steps[2].State == store.StepDead {
			return true, ""
		}
		why := fmt.Sprintf("steps %+v; want lost done, archived and vanished dead", wf.Steps)
		wf, _ = e.Store.Get(ctx, id)
		return false, why
	})
	if e := wf.Steps[1].Error; !strings.HasPrefix(e, "archived: task archived by asynq before the step began") {
		t.Errorf("archived step's error: %q", e)
	}
	if e := wf.Steps[2].Error; !strings.HasPrefix(e, "missing: ") {
		t.Errorf("vanished step's error: %q", e)
	}
	scrapeWhen(t, url, map[string]float64{`agentq_reconciled_steps_total{reason="requeued"}`: 1,
		`agentq_reconciled_steps_total{reason="archived"}`: 1, `agentq_reconciled_steps_total{reason="missing"}`: 1})
	for _, s := range []string{"archived", "vanished"} {
		if err := e.Client.Requeue(ctx, tasks.TaskID(id, s)); err != nil {
			t.Fatalf("requeue %s: %v", s, err)
		}
	}
	if wf = e.Wait(t, id, 10*time.Second, store.StateCompleted); wf.Steps[2].Attempts != 2 {
		t.Fatalf("after requeues: %+v", wf.Steps)
	}
}

// neverCalled is a router the reconciler must not use.
type neverCalled struct{ t *testing.T }

func (n neverCalled) Chat(context.Context, string, llmclient.Request) (*llmclient.Response, error) {
	n.t.Error("the reconciler called the router")
	return nil, context.Canceled
}
func (n neverCalled) Route(string) (router.Route, bool) { return router.Route{}, false }

// One pass looks at a page of the open index, oldest first, and only
// while it holds the cluster-wide lock; a workflow it looked at waits for
// the grace period before it is looked at again, and a finished one
// leaves the index.
func TestReconcilerPagesAndHoldsTheLock(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	ctx := context.Background()
	insp := asynq.NewInspectorFromRedisClient(e.Redis)
	var ids []string
	for i := 0; i < 5; i++ {
		id := e.Submit(t, e.Spec(step("solo", "")))
		if err := insp.DeleteTask("default", tasks.TaskID(id, "s")); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	done := e.Submit(t, e.Spec(step("solo", "")))
	if _, err := e.Store.Settle(ctx, done, "s", store.Outcome{Done: true}, nil); err != nil {
		t.Fatal(err)
	}
	h, err := engine.NewHandler(engine.HandlerOptions{MaxOutputBytes: e.Config.Limits.MaxOutputBytes, MaxMapItems: e.Config.Limits.MaxMapItems, Redis: e.Redis, Retention: e.Config.Retention.D(), Client: e.Asynq, Router: neverCalled{t}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Add(time.Hour)
	clock := func() time.Time { return now }
	rec, err := h.Reconciler(engine.ReconcilerOptions{Inspector: insp, Interval: time.Minute, Grace: time.Minute, Workflows: 2, Owner: "one", Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := h.Reconciler(engine.ReconcilerOptions{Inspector: insp, Interval: time.Minute, Owner: "two", Now: clock})
	var total engine.ReconcileCounts
	for pass, want := range []int{2, 2, 2, 0} {
		c, err := rec.Pass(ctx)
		if err != nil || !c.Led || c.Workflows != want {
			t.Fatalf("pass %d: %+v %v; want %d workflows looked at", pass, c, err, want)
		}
		total.Requeued += c.Requeued
		if c, err := other.Pass(ctx); err != nil || c.Led || c.Workflows != 0 {
			t.Fatalf("the other worker's pass %d: %+v %v; want nothing done without the lock", pass, c, err)
		}
	}
	if total.Requeued != 5 {
		t.Fatalf("%d steps enqueued again, want 5", total.Requeued)
	}
	for _, id := range ids {
		if info, err := insp.GetTaskInfo("default", tasks.TaskID(id, "s")); err != nil || info.State != asynq.TaskStatePending {
			t.Fatalf("%s: %+v %v; want its task pending again", id, info, err)
		}
	}
	if n, _ := e.Store.OpenCount(ctx); n != 5 {
		t.Fatalf("%d workflows in the open index, want the 5 still running (the completed one forgotten)", n)
	}
	now = now.Add(2 * time.Minute) // past the grace period: due again, nothing to do
	if c, err := rec.Pass(ctx); err != nil || c.Workflows != 2 || c.Requeued != 0 || c.Settled != 0 {
		t.Fatalf("a pass after the grace period: %+v %v", c, err)
	}
}
