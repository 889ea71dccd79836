package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// A freed slot of a concurrency key wakes the key's oldest waiting step at
// once, in the freeing step's worker slot: with asynq's poll far longer
// than a step (noPoll), tenant A's 60-item map at limit 5 runs within
// 1.5x its ideal (12 rounds of one step each), and no hand-over (a step's
// end to the start of the waiter its slot went to) lasts asynq's shortest
// poll sleep (half noPoll). Tenant B's five one-step workflows, submitted
// while A's map is parked on its key, each complete within a second:
// A's parked steps hold no worker slot and none of their tasks waits in
// the queue ahead of B's, and the slots A's steps free take B's steps as
// they come, without waiting for the poll.
func TestAFreedKeySlotWakesItsWaiterAtOnceAndParkedStepsLetOthersThrough(t *testing.T) {
	if testing.Short() {
		t.Skip("a timing test: 60 steps of 200ms")
	}
	const (
		n     = 60
		limit = 5
		d     = 200 * time.Millisecond // 100ms held under a quiet -race run (1.06x) but CPU starvation on 2 loaded cores reached 1.6x with no hand-over near a poll
	)
	var (
		mu         sync.Mutex
		first      time.Time
		busy       time.Duration // the A steps' own run times, summed
		aStarts    []time.Time
		aEnds      []time.Time
		bSubmitted = map[string]time.Time{}
	)
	e := testenv.Start(t, testenv.Options{NoWorker: true, PollInterval: noPoll, Steps: map[string]engine.StepFunc{
		"work": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			start := time.Now()
			mu.Lock()
			if aStarts = append(aStarts, start); first.IsZero() {
				first = start
			}
			mu.Unlock()
			tm := time.NewTimer(d) // the step's own work: a fixed time
			defer tm.Stop()
			select {
			case <-tm.C:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			mu.Lock()
			busy += time.Since(start)
			aEnds = append(aEnds, time.Now())
			mu.Unlock()
			return "ok", nil
		},
		"quick": func(ctx context.Context, s *engine.CodeStep) (any, error) { return "ok", nil },
	}})
	e.Config.Worker.Concurrency = 8 // more than A's limit: A's steps over it park
	a := e.Submit(t, e.Spec(fmt.Sprintf(`name: tenant-a
input: { items: [%s] }
concurrency: { key: tenant-a, limit: %d }
steps:
  - { id: each, for_each: "{{ .Input.items }}", run: work, timeout: 1m }
`, items(n), limit)))
	e.StartWorker(t) // asynq takes A's tasks at start, then polls every 1.5 to 4.5s

	// B comes while A's map is parked: two rounds of A ran, A's other
	// steps wait for its key, and the queue holds no task (asynq's
	// processor, having found it empty, sleeps for its next poll)
	insp := asynq.NewInspectorFromRedisClient(e.Redis)
	poll.Until(t, 30*time.Second, func() (bool, string) {
		mu.Lock()
		done := len(aEnds)
		mu.Unlock()
		loads, _, _, err := e.Store.KeyLoads(t.Context(), 10)
		waiting := int64(0)
		for _, l := range loads {
			if l.Key == "tenant-a" {
				waiting = l.Waiting
			}
		}
		q, qerr := insp.GetQueueInfo("default")
		pending := -1
		if qerr == nil {
			pending = q.Pending
		}
		return done >= 2*limit && waiting > 0 && pending == 0,
			fmt.Sprintf("tenant a's map is not parked with an empty queue: %d steps done, %d waiting, %d tasks pending (%v, %v)", done, waiting, pending, err, qerr)
	})
	var bs []string
	for range 5 {
		at := time.Now()
		b := e.Submit(t, e.Spec(`name: tenant-b
concurrency: { key: tenant-b, limit: 3 }
steps:
  - { id: one, run: quick, timeout: 1m }
`))
		bs = append(bs, b)
		bSubmitted[b] = at
	}

	wf := e.Wait(t, a, 2*time.Minute, store.StateCompleted, store.StateBlocked, store.StateFailed)
	if wf.State != store.StateCompleted || wf.FinishedAt == nil {
		t.Fatalf("tenant a's map is %s", wf.State)
	}
	mu.Lock()
	wall := wf.FinishedAt.Sub(first)
	ideal := max(time.Duration((n+limit-1)/limit)*d, busy/limit)
	ran := len(aStarts)
	gaps := handOvers(aStarts, aEnds, limit)
	mu.Unlock()
	t.Logf("tenant a: %d steps of %s at limit %d: ideal %s (%d rounds of %s; measured step time / limit %s), took %s (%.2fx)",
		n, d, limit, ideal.Round(time.Millisecond), (n+limit-1)/limit, d, (busy / limit).Round(time.Millisecond), wall.Round(time.Millisecond), float64(wall)/float64(ideal))
	slices.Sort(gaps)
	if len(gaps) != n-limit {
		t.Fatalf("%d hand-overs, want %d", len(gaps), n-limit)
	}
	{
		var sum time.Duration
		for _, g := range gaps {
			sum += g
		}
		t.Logf("tenant a's %d hand-overs (a step's end to its waiter's start): mean %s, median %s, longest %s",
			len(gaps), (sum / time.Duration(len(gaps))).Round(time.Millisecond), gaps[len(gaps)/2].Round(time.Millisecond), gaps[len(gaps)-1].Round(time.Millisecond))
	}
	if longest := gaps[len(gaps)-1]; longest >= noPoll/2 {
		t.Errorf("a hand-over took %s: at least asynq's shortest poll sleep (%s), so a woken step waited for the poll", longest.Round(time.Millisecond), noPoll/2)
	}
	if wall > ideal*3/2 {
		t.Errorf("tenant a's map took %s, over 1.5x its ideal %s: a freed slot waited for asynq's poll (%s) to wake its waiter", wall.Round(time.Millisecond), ideal.Round(time.Millisecond), noPoll)
	}

	for _, b := range bs {
		w := e.Wait(t, b, time.Minute, store.StateCompleted, store.StateBlocked, store.StateFailed)
		if w.State != store.StateCompleted || w.FinishedAt == nil {
			t.Fatalf("tenant b's workflow %s is %s", b, w.State)
		}
		took := w.FinishedAt.Sub(bSubmitted[b])
		t.Logf("tenant b: %s completed %s after its submit", b, took.Round(time.Millisecond))
		if took > time.Second {
			t.Errorf("tenant b's workflow %s completed %s after its submit (over 1s) while tenant a's map was parked", b, took.Round(time.Millisecond))
		}
	}
	if ran != n {
		t.Errorf("tenant a's steps ran %d times, want %d (once each)", ran, n)
	}
}

// handOvers pairs, in time order, the k-th end of a step with the start
// of the (k+limit)-th step (the waiter its freed slot went to) and
// returns each pair's gap.
func handOvers(starts, ends []time.Time, limit int) []time.Duration {
	starts, ends = slices.Clone(starts), slices.Clone(ends)
	slices.SortFunc(starts, time.Time.Compare)
	slices.SortFunc(ends, time.Time.Compare)
	var gaps []time.Duration
	for k := 0; k < len(ends) && k+limit < len(starts); k++ {
		gaps = append(gaps, starts[k+limit].Sub(ends[k]))
	}
	return gaps
}

// The step a freed slot wakes runs in the worker slot of the step that
// freed it (a hand-off, no poll) under its grant's own asynq task: active
// under asynq's lease while it runs (a worker that dies then leaves it to
// asynq's recoverer, as any task), completed as asynq completes a task.
func TestAWokenStepRunsInTheFreedSlotUnderItsGrantsTask(t *testing.T) {
	t.Parallel()
	var (
		n        atomic.Int32
		started  = make(chan string, 2)
		release  = make(chan struct{})
		grantIDs = make(chan []string, 1)
	)
	var insp *asynq.Inspector
	e := testenv.Start(t, testenv.Options{NoWorker: true, PollInterval: noPoll, Steps: map[string]engine.StepFunc{
		"hold": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			if n.Add(1) == 1 {
				started <- s.Workflow()
				<-release
				return "ok", nil
			}
			var ids []string
			active, err := insp.ListActiveTasks("default")
			if err != nil {
				return nil, err
			}
			for _, a := range active {
				if strings.HasPrefix(a.ID, flow.StepTaskID(s.Workflow(), s.ID(), 0)+":k") {
					ids = append(ids, a.ID)
				}
			}
			grantIDs <- ids
			return "ok", nil
		}}})
	insp = asynq.NewInspectorFromRedisClient(e.Redis)
	one := "name: one\nconcurrency: { key: only, limit: 1 }\nsteps:\n  - { id: s, run: hold, timeout: 1m }\n"
	ids := []string{e.Submit(t, e.Spec(one)), e.Submit(t, e.Spec(one))}
	e.StartWorker(t)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	holder := <-started
	woken := ids[0]
	if woken == holder {
		woken = ids[1]
	}
	poll.Until(t, 10*time.Second, func() (bool, string) {
		wf, err := e.Store.Get(t.Context(), woken)
		return err == nil && wf.Steps[0].State == store.StepThrottled, fmt.Sprintf("the second step is not throttled: %+v %v", wf, err)
	})
	close(release)
	var grant []string
	select {
	case grant = <-grantIDs:
	case <-time.After(20 * time.Second): // that a hand-off ran it, not a poll, its event says (HandedOff, below)
		t.Fatalf("the woken step did not run within 20s of its slot's release")
	}
	if len(grant) != 1 {
		t.Fatalf("while the woken step ran, its grant's active tasks were %v (want one)", grant)
	}
	for _, id := range ids {
		e.Wait(t, id, 20*time.Second, store.StateCompleted)
	}
	// the grant's task completes after the woken step's run, so after
	// its event was sent (the event follows the settle the test waited for)
	poll.Until(t, 10*time.Second, func() (bool, string) {
		info, err := insp.GetTaskInfo("default", grant[0])
		return err == nil && info.State == asynq.TaskStateCompleted, fmt.Sprintf("the grant's task: %+v, %v (want completed)", info, err)
	})
	handed := false
	for len(e.Events) > 0 {
		if ev := <-e.Events; ev.Workflow == woken && ev.State == store.StepDone {
			handed = ev.HandedOff
		}
	}
	if !handed {
		t.Errorf("the woken step was not run by a hand-off")
	}
}
