package engine_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/shard"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// primaryCommands reads each primary's commands processed so far, by
// address.
func primaryCommands(t *testing.T, c redis.UniversalClient) map[string]int64 {
	t.Helper()
	stats, err := redistest.PrimaryStats(t.Context(), c.(*redis.ClusterClient))
	if err != nil || len(stats) != 3 {
		t.Fatalf("the primaries' stats: %v %v", stats, err)
	}
	out := map[string]int64{}
	for a, st := range stats {
		out[a] = st.Commands
	}
	return out
}

// heldByThePause submits n one-step workflows (run: noop) to the paused
// default queue, then one to the critical queue (which e's worker also
// serves) and waits for it: when it is done the worker has polled, and
// none of the n may have begun. It returns their ids.
func heldByThePause(t *testing.T, e *testenv.Env, n int) []string {
	t.Helper()
	one := e.Spec("name: one\nsteps:\n  - { id: s, run: noop }\n")
	ids := make([]string, n)
	for i := range ids {
		ids[i] = e.Submit(t, one)
	}
	other := e.Spec("name: other\ndefaults: { queue: critical }\nsteps:\n  - { id: s, run: noop }\n")
	e.Wait(t, e.Submit(t, other), 30*time.Second, store.StateCompleted)
	for _, id := range ids {
		if wf, err := e.Client.Status(t.Context(), id); err != nil || wf.Steps[0].Attempts != 0 {
			t.Fatalf("a step of the paused queue began: %+v %v", wf, err)
		}
	}
	return ids
}

// spread runs n workflows of a 10-step chain of code steps to the end
// and returns each primary's commands over the run, and the largest
// primary's distance from their mean (0.1: 10% over it).
func spread(t *testing.T, e *testenv.Env, workflows int) (map[string]int64, float64) {
	t.Helper()
	chain := e.Spec(codeChain("spread", "noop", 10, ""))
	before := primaryCommands(t, e.Redis)
	start := time.Now()
	ids := make([]string, workflows)
	for i := range ids {
		ids[i] = e.Submit(t, chain)
	}
	for _, id := range ids {
		e.Wait(t, id, 5*time.Minute, store.StateCompleted)
	}
	took := time.Since(start)
	after := primaryCommands(t, e.Redis)
	per := map[string]int64{}
	var sum int64
	for a, n := range after {
		per[a] = n - before[a]
		sum += per[a]
	}
	mean := float64(sum) / float64(len(per))
	worst := 0.0
	for _, n := range per {
		worst = max(worst, abs(float64(n)/mean-1))
	}
	rates := []string{}
	for _, a := range slices.Sorted(maps.Keys(per)) {
		rates = append(rates, fmt.Sprintf("%s %d (%.0f/s)", a, per[a], float64(per[a])/took.Seconds()))
	}
	t.Logf("%d steps in %s (%.0f steps/s); commands per primary: %s; the farthest %.1f%% from the mean",
		10*workflows, took.Round(time.Millisecond), float64(10*workflows)/took.Seconds(), strings.Join(rates, ", "), 100*worst)
	return per, worst
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// A queue of 6 shards on a 3-primary Redis Cluster: its shards' hash
// slots are Redis's own count of their keys, 2 on each primary; 10,000
// steps spread the commands over the primaries within ±20% (the same
// steps on one shard load its primary past that); a pause stops every
// shard, a resume starts them all.
func TestAShardedQueueSpreadsOverTheClusterPrimaries(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 10,000 steps on a three-node Redis Cluster")
	}
	t.Parallel()
	noop := func(context.Context, *engine.CodeStep) (any, error) { return "ok", nil }
	e := testenv.Start(t, testenv.Options{Cluster: true, NoWorker: true, Queues: map[string]config.Queue{"default": {Shards: 6}},
		Steps: map[string]engine.StepFunc{"noop": noop}})
	ctx := t.Context()
	names := shard.Names("default", 6)
	perPrimary := map[string]int{}
	for _, name := range names {
		slot, err := e.Redis.ClusterKeySlot(ctx, "asynq:{"+name+"}:pending").Result()
		if err != nil || slot != int64(shard.Slot(name)) {
			t.Fatalf("shard %s: Redis puts it in slot %d (%v), shard.Slot says %d", name, slot, err, shard.Slot(name))
		}
		m, err := e.Redis.(*redis.ClusterClient).MasterForKey(ctx, "{"+name+"}")
		if err != nil {
			t.Fatal(err)
		}
		perPrimary[m.Options().Addr]++
	}
	if len(perPrimary) != 3 || slices.Max(slices.Collect(maps.Values(perPrimary))) != 2 {
		t.Fatalf("6 shards over the primaries: %v (want 2 on each)", perPrimary)
	}
	e.Config.Worker.Concurrency = 32
	e.Config.Worker.Queues = map[string]int{"default": 1, "critical": 1}
	e.StartWorker(t)

	if _, worst := spread(t, e, 1000); worst > 0.2 {
		t.Fatalf("a 6-shard queue: a primary %.1f%% from the mean (want within 20%%)", 100*worst)
	}
	insp := asynq.NewInspectorFromRedisClient(e.Redis)
	queues, err := e.Client.Queues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(queues, func(q producer.QueueInfo) bool { return q.Name == "default" })
	if i < 0 || queues[i].Shards != 6 || queues[i].Completed < 10000 || slices.ContainsFunc(queues, func(q producer.QueueInfo) bool { return strings.Contains(q.Name, ".") }) {
		t.Fatalf("queue list: %+v (want default once, 6 shards, its 10,000 steps counted together)", queues)
	}

	// a pause stops every shard: a later workflow on another queue runs,
	// none of the paused queue's begins
	if ch, err := e.Client.PauseQueue(ctx, "default"); err != nil || !ch.Changed || !ch.Paused {
		t.Fatalf("pause: %+v %v", ch, err)
	}
	for _, name := range names {
		if qi, err := insp.GetQueueInfo(name); err != nil || !qi.Paused {
			t.Fatalf("shard %s after the pause: %+v %v", name, qi, err)
		}
	}
	held := heldByThePause(t, e, 120)
	for _, name := range names {
		if qi, err := insp.GetQueueInfo(name); err != nil || qi.Pending == 0 || qi.Active != 0 {
			t.Fatalf("paused shard %s: %+v %v (want its steps pending)", name, qi, err)
		}
	}
	if ch, err := e.Client.ResumeQueue(ctx, "default"); err != nil || !ch.Changed || ch.Paused {
		t.Fatalf("resume: %+v %v", ch, err)
	}
	for _, id := range held {
		e.Wait(t, id, time.Minute, store.StateCompleted)
	}

	// the same steps on one shard: its primary carries the queue alone
	e.StopWorker(t)
	e.Config.Queues = nil
	e.Client = e.NewClient()
	e.StartWorker(t)
	if _, worst := spread(t, e, 300); worst < 0.2 {
		t.Errorf("one shard: the primaries within %.1f%% of each other; the queue's primary should carry more", 100*worst)
	}
}

// A worker SIGKILLed with steps running on every shard of a 6-shard
// queue: asynq's recoverer, in the worker that comes next, runs each
// again, on its own shard.
func TestAKilledWorkersStepsOnEveryShardAreRecovered(t *testing.T) {
	if testing.Short() {
		t.Skip("waits about a minute for asynq to recover the killed worker's tasks")
	}
	t.Parallel()
	const n = 60
	// every call hangs until the kill, the provider's timeout as long as
	// the step's: with the test configuration's 5s, calls that timed out
	// before every step had started (a loaded machine) opened the
	// provider's breaker, and its fast failures archived the steps
	e := testenv.Start(t, testenv.Options{Cluster: true, NoWorker: true, Queues: map[string]config.Queue{"default": {Shards: 6}},
		Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{{Name: "hang", Fault: &chaosllm.Fault{Kind: chaosllm.KindHang}}}}})
	ids := make([]string, n)
	for i := range ids {
		ids[i] = e.Submit(t, e.Spec("name: killed\ndefaults: { route: solo, timeout: 10m }\nsteps:\n  - { id: a, prompt: one }\n"))
	}
	p := startWorkerProcess(t, e, n, workerEnv+"_CLUSTER=1", workerEnv+"_SHARDS=6", workerEnv+"_PROVIDER_TIMEOUT=10m")
	insp := asynq.NewInspectorFromRedisClient(e.Redis)
	r := spec.Resolved{Queue: "default", Shards: 6}
	// every step running (its task active on its shard) at one moment,
	// and each one's attempt then, to compare with after the kill
	attempts := map[string]int{}
	poll.Until(t, 60*time.Second, func() (bool, string) {
		for _, name := range shard.Names("default", 6) {
			if qi, err := insp.GetQueueInfo(name); err != nil || qi.Active == 0 {
				return false, fmt.Sprintf("shard %s while the worker runs: %+v %v (want steps active on every shard)", name, qi, err)
			}
		}
		for _, id := range ids {
			if info, err := insp.GetTaskInfo(flow.TaskQueue(id, r), flow.StepTaskID(id, "a", 0)); err != nil || info.State != asynq.TaskStateActive {
				return false, fmt.Sprintf("workflow %s's task: %+v %v (want active on its shard)", id, info, err)
			}
			wf, err := e.Store.Get(t.Context(), id)
			if err != nil || wf.Steps[0].State != store.StepRunning {
				return false, fmt.Sprintf("workflow %s: %+v %v (want its step running)", id, wf, err)
			}
			attempts[id] = wf.Steps[0].Attempts
		}
		return true, ""
	})
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	if err := e.Chaos.SetScenario(chaosllm.Scenario{Keys: testenv.Keys}); err != nil {
		t.Fatal(err)
	}
	e.StartWorker(t)
	for _, id := range ids {
		if wf := e.Wait(t, id, 150*time.Second, store.StateCompleted); wf.Steps[0].Attempts != attempts[id]+1 {
			t.Fatalf("workflow %s: step %+v (want done on the attempt after the killed one, %d)", id, wf.Steps[0], attempts[id]+1)
		}
	}
}

// A producer and the workers at different shard counts for a queue: the
// submit is refused, naming the queue and both counts (its tasks would
// wait on shards nobody serves); at the same count it runs.
func TestASubmitAtAnotherShardCountThanTheWorkersIsRefused(t *testing.T) {
	noop := func(context.Context, *engine.CodeStep) (any, error) { return "ok", nil }
	e := testenv.Start(t, testenv.Options{Queues: map[string]config.Queue{"default": {Shards: 6}}, Steps: map[string]engine.StepFunc{"noop": noop}})
	one := e.Spec("name: one\nsteps:\n  - { id: s, run: noop }\n")
	cfg := e.Config
	cfg.Queues = nil
	o := app.ClientOptions(cfg)
	unsharded := producer.NewClient(e.Redis, o)
	_, err := unsharded.Submit(t.Context(), one)
	if err == nil || !strings.Contains(err.Error(), `queue "default" is in 1 shard(s) for this workflow, but live workers serve it in 6`) {
		t.Fatalf("a submit at 1 shard to workers at 6: %v", err)
	}
	// a step with no route, function or tool (an approval) goes to a
	// queue too
	approval := e.Spec("name: ask\nsteps:\n  - { id: ok, approve: { message: go } }\n")
	if _, err := unsharded.Submit(t.Context(), approval); err == nil || !strings.Contains(err.Error(), "steps[0] (ok): queue \"default\" is in 1 shard(s)") {
		t.Fatalf("an approval at 1 shard to workers at 6: %v", err)
	}
	sharded := producer.NewClient(e.Redis, app.ClientOptions(e.Config))
	id, err := sharded.Submit(t.Context(), one)
	if err != nil {
		t.Fatal(err)
	}
	e.Wait(t, id, 20*time.Second, store.StateCompleted)
}

// A queue paused at one shard count stays paused at the next: the
// workers that start serving its new shards pause them first; a resume
// lets every shard go.
func TestAPauseCoversTheShardsOfALaterCount(t *testing.T) {
	noop := func(context.Context, *engine.CodeStep) (any, error) { return "ok", nil }
	e := testenv.Start(t, testenv.Options{Queues: map[string]config.Queue{"default": {Shards: 2}}, Steps: map[string]engine.StepFunc{"noop": noop}})
	if ch, err := e.Client.PauseQueue(t.Context(), "default"); err != nil || !ch.Changed {
		t.Fatalf("pause: %+v %v", ch, err)
	}
	e.StopWorker(t)
	e.Config.Queues = map[string]config.Queue{"default": {Shards: 5}}
	e.Config.Worker.Queues = map[string]int{"default": 1, "critical": 1}
	e.Client = e.NewClient()
	e.StartWorker(t)
	st := store.New(e.Redis, time.Hour, nil)
	for _, name := range shard.Names("default", 5) {
		if paused, err := st.AsynqPaused(t.Context(), name); err != nil || !paused {
			t.Fatalf("shard %s of the paused queue at its new count: paused %v (%v)", name, paused, err)
		}
	}
	ids := heldByThePause(t, e, 20)
	qs, err := e.Client.Queues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(qs, func(q producer.QueueInfo) bool { return q.Name == "default" }); i < 0 || !qs[i].Paused || qs[i].Shards != 5 || qs[i].PausedShards != 5 {
		t.Fatalf("queue list: %+v (want default paused in its 5 shards; the 2 old ones never held a task)", qs)
	}
	if ch, err := e.Client.ResumeQueue(t.Context(), "default"); err != nil || !ch.Changed {
		t.Fatalf("resume: %+v %v", ch, err)
	}
	for _, id := range ids {
		e.Wait(t, id, 20*time.Second, store.StateCompleted)
	}
}

// A queue paused with agentq and resumed from elsewhere (asynqmon) is not
// paused again by the next worker: the mark is stale, and cleared.
func TestAPauseUndoneElsewhereIsNotRedone(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	if ch, err := e.Client.PauseQueue(t.Context(), "default"); err != nil || !ch.Changed {
		t.Fatalf("pause: %+v %v", ch, err)
	}
	if err := asynq.NewInspectorFromRedisClient(e.Redis).UnpauseQueue("default"); err != nil {
		t.Fatal(err)
	}
	e.StopWorker(t)
	e.StartWorker(t)
	st := store.New(e.Redis, time.Hour, nil)
	paused, err := st.AsynqPaused(t.Context(), "default")
	marked, merr := st.QueuePaused(t.Context(), "default")
	if err != nil || merr != nil || paused || len(marked) != 0 {
		t.Fatalf("after a restart: paused %v (%v), marked %v (%v); want neither", paused, err, marked, merr)
	}
	e.Wait(t, e.Submit(t, e.Spec(step("solo", ""))), 20*time.Second, store.StateCompleted)
}
