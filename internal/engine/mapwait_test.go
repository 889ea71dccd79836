package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// commandSizes counts the commands a client sends: those of more than
// 100 arguments (a read of every step) and the others.
type commandSizes struct{ large, small atomic.Int64 }

func (f *commandSizes) count(cmd redis.Cmder) {
	if len(cmd.Args()) > 100 {
		f.large.Add(1)
	} else {
		f.small.Add(1)
	}
}
func (f *commandSizes) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f *commandSizes) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		f.count(cmd)
		return next(ctx, cmd)
	}
}
func (f *commandSizes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			f.count(c)
		}
		return next(ctx, cmds)
	}
}

// waitCounting waits on workflow id through a client of its own every
// 20ms and fails the test unless each poll cost a fixed number of small
// commands (at most 3) and, over the whole wait, at most one command read
// every step (the final read of a wide workflow). It returns the
// reports.
func waitCounting(t *testing.T, e *testenv.Env, id string, wantLarge int64) (*producer.Workflow, []producer.Workflow) {
	t.Helper()
	rdb := redis.NewClient(e.DB.Options())
	t.Cleanup(func() { rdb.Close() })
	cs := &commandSizes{}
	rdb.AddHook(cs)
	c := producer.NewClient(rdb, producer.ClientOptions{Limits: app.ClientOptions(e.Config).Limits, Retention: e.Config.Retention.D(), Routes: e.Config.RouteNames(), SkipWorkerCheck: true})
	var reports []producer.Workflow
	const every = 20 * time.Millisecond
	start := time.Now()
	wf, err := c.Wait(t.Context(), id, every, func(w *producer.Workflow) { reports = append(reports, *w) })
	polls := int64(time.Since(start)/every) + 2 // at most: one at the start, one per tick, the last
	if err != nil || wf.State != store.StateCompleted {
		t.Fatalf("wait: %v %+v", err, wf)
	}
	if n := cs.large.Load(); n != wantLarge {
		t.Errorf("%d reads of over 100 fields while waiting, want %d", n, wantLarge)
	}
	t.Logf("%d small commands, %d large, for at most %d polls", cs.small.Load(), cs.large.Load(), polls)
	if n := cs.small.Load(); n > 3*polls {
		t.Errorf("%d commands for at most %d polls: a poll's cost grows with the workflow", n, polls)
	}
	if len(reports) < 2 {
		t.Errorf("%d progress reports", len(reports))
	}
	return wf, reports
}

// Waiting on a 400-step chord reads its counters each poll (a read of a
// fixed size), reports progress by them, and reads the steps once, at
// the end.
func TestWaitOnAWideChordPollsCounters(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true, Steps: map[string]engine.StepFunc{
		"one": func(ctx context.Context, s *engine.CodeStep) (any, error) { return 1, nil }}})
	var b strings.Builder
	b.WriteString("name: wide\nsteps:\n")
	var ids []string
	for i := range 400 {
		fmt.Fprintf(&b, "  - { id: s%d, run: one }\n", i)
		ids = append(ids, fmt.Sprintf("s%d", i))
	}
	fmt.Fprintf(&b, "  - { id: body, run: one, depends_on: [%s] }\n", strings.Join(ids, ", "))
	c := producer.NewClient(e.Redis, producer.ClientOptions{Retention: e.Config.Retention.D(), Routes: e.Config.RouteNames(), SkipWorkerCheck: true,
		Limits: func() spec.Limits { l := spec.DefaultLimits(); l.MaxSteps = 500; return l }()})
	wspec, err := c.Parse("wide.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.Submit(t.Context(), wspec)
	if err != nil {
		t.Fatal(err)
	}
	e.StartWorker(t)
	wf, reports := waitCounting(t, e, id, 1) // the steps read once, at the end
	if len(wf.Steps) != 401 {
		t.Fatalf("the final read has %d steps, want 401", len(wf.Steps))
	}
	for _, r := range reports {
		if r.Steps != nil || r.Counts == nil {
			t.Fatalf("a wide workflow reported with its %d steps (counts %v)", len(r.Steps), r.Counts)
		}
	}
	last := reports[len(reports)-1]
	if last.State != store.StateCompleted || *last.Counts != (record.Counts{Steps: 401, Settled: 401}) {
		t.Errorf("last report %s %+v", last.State, last.Counts)
	}
}

// Waiting on a workflow with a 1,000-item map costs each poll the same
// few small commands: the map's counters, never its instances.
func TestWaitOnAWideMapReadsItsCounters(t *testing.T) {
	t.Parallel() // its own database, worker and provider: it runs beside the others
	ms := newMapSteps()
	e := testenv.Start(t, testenv.Options{NoWorker: true, Steps: ms.funcs()})
	id := e.Submit(t, e.Spec(mapSpec(1000, "")))
	e.StartWorker(t)
	wf, reports := waitCounting(t, e, id, 0)
	if m := wf.Steps[1].Map; m == nil || m.Settled != 1000 {
		t.Fatalf("map counts %+v", m)
	}
	var settled []int
	for _, r := range reports {
		if len(r.Steps) > 1 && r.Steps[1].Map != nil {
			settled = append(settled, r.Steps[1].Map.Settled)
		}
	}
	if len(settled) < 2 || !slices.IsSorted(settled) || settled[len(settled)-1] != 1000 {
		t.Errorf("the map's progress as reported: %v", settled)
	}
}
