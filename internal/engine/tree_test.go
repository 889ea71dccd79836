package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// forkSpec starts three children of itself, each after a model call: a
// tree that would grow without end but for limits.max_tree_workflows.
const forkSpec = `name: fork
input: { items: [1, 2, 3] }
steps:
  - { id: think, route: solo, prompt: "think" }
  - { id: kids, depends_on: [think], for_each: "{{ .Input.items }}", workflow: { spec: fork } }
`

// countNamed counts the workflow records of name (in state, if not
// empty), a page at a time.
func countNamed(t *testing.T, e *testenv.Env, name, state string) int {
	t.Helper()
	n, after := 0, ""
	for {
		page, err := e.Client.ListPage(t.Context(), producer.ListOptions{Name: name, State: state, Limit: 1000, After: after})
		if err != nil {
			t.Fatal(err)
		}
		n += len(page)
		if len(page) < 1000 {
			return n
		}
		after = page[len(page)-1].ID
	}
}

// workflowKeys counts every workflow record in Redis, whatever its name.
func workflowKeys(t *testing.T, e *testenv.Env) int {
	t.Helper()
	n := 0
	iter := e.Redis.Scan(t.Context(), 0, store.Prefix+"{wf:*}:wf", 1000).Iterator()
	for iter.Next(t.Context()) {
		n++
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// holdsFor checks cond every poll interval for d; it fails the test the
// first time cond does not hold.
func holdsFor(t *testing.T, d time.Duration, cond func() (bool, string)) {
	t.Helper()
	end := time.Now().Add(d)
	poll.Until(t, d+10*time.Second, func() (bool, string) {
		if ok, why := cond(); !ok {
			t.Fatalf("no longer holds: %s", why)
		}
		return time.Now().After(end), ""
	})
}

// A spec that starts itself three times over, under
// limits.max_tree_workflows 20, with its worker restarted while it
// spawns: the tree grows to 20 workflows and never past (each spawn
// reserved by its child's id, in one script with the count), the 41
// instances that would have gone past are dead-lettered as class limit
// naming the bound; raised to 24, a requeued one starts its child and the
// tree grows to 24 and stops. A cancel of the root ends all 24, after
// which no workflow is written.
func TestATreeNeverPassesMaxTreeWorkflows(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{NoWorker: true, Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{{Latency: chaosllm.Fixed(40 * time.Millisecond)}}}})
	e.Config.Limits.MaxTreeWorkflows = 20
	fork := e.Spec(forkSpec)
	if _, err := e.Client.PutSpec(t.Context(), "fork", fork); err != nil {
		t.Fatal(err)
	}
	root := e.Submit(t, fork)
	most := 0
	bounded := func(bound int) func() (bool, string) {
		return func() (bool, string) {
			n, err := e.Store.TreeSize(t.Context(), root)
			if err != nil {
				t.Fatal(err)
			}
			if recs := countNamed(t, e, "fork", ""); recs > bound || n > bound {
				t.Fatalf("the tree has %d workflows (%d records), over its bound %d", n, recs, bound)
			}
			most = max(most, n)
			return false, ""
		}
	}
	e.StartWorker(t)
	poll.Until(t, 30*time.Second, func() (bool, string) {
		bounded(20)()
		return most >= 6, fmt.Sprintf("the tree has %d workflows", most)
	})
	e.StopWorker(t) // while it spawns
	bounded(20)()
	e.StartWorker(t)
	limited := func(want int) func() (bool, string) {
		return func() (bool, string) {
			bounded(e.Config.Limits.MaxTreeWorkflows)()
			dls, err := e.Client.DeadLetters(t.Context(), "limit")
			if err != nil {
				t.Fatal(err)
			}
			return len(dls) == want, fmt.Sprintf("%d dead letters of class limit, want %d; the tree has %d workflows", len(dls), want, most)
		}
	}
	poll.Until(t, 60*time.Second, limited(41)) // 20 workflows × 3 instances, 19 of them children
	if n, _ := e.Store.TreeSize(t.Context(), root); n != 20 || countNamed(t, e, "fork", "") != 20 {
		t.Fatalf("the tree has %d workflows, want 20", n)
	}
	dls, _ := e.Client.DeadLetters(t.Context(), "limit")
	if r := dls[0].Reason; !strings.HasPrefix(r, "limit: ") || !strings.Contains(r, "limits.max_tree_workflows (20)") {
		t.Fatalf("the dead letter's reason %q does not name the bound", r)
	}

	e.StopWorker(t)
	e.Config.Limits.MaxTreeWorkflows = 24
	e.StartWorker(t)
	if err := e.Client.Requeue(t.Context(), dls[0].TaskID); err != nil {
		t.Fatal(err)
	}
	// only the requeued step can start a child: its child and three more,
	// 4 × 3 instances, 3 of them children
	poll.Until(t, 60*time.Second, limited(41-1+9))
	if n, _ := e.Store.TreeSize(t.Context(), root); n != 24 || countNamed(t, e, "fork", "") != 24 {
		t.Fatalf("after the bound was raised the tree has %d workflows, want 24", n)
	}
	start := time.Now()
	if _, err := e.Client.Cancel(t.Context(), root); err != nil {
		t.Fatal(err)
	}
	t.Logf("cancel of a root of 24 workflows returned in %s", time.Since(start))
	poll.Until(t, 30*time.Second, func() (bool, string) {
		n := countNamed(t, e, "fork", store.StateCanceled)
		return n == 24, fmt.Sprintf("%d of 24 canceled", n)
	})
	keys := workflowKeys(t, e)
	holdsFor(t, 2*time.Second, func() (bool, string) {
		n, _ := e.Store.TreeSize(t.Context(), root)
		k := workflowKeys(t, e)
		return n == 24 && k == keys, fmt.Sprintf("after the cancel: a tree of %d, %d workflow records (were %d)", n, k, keys)
	})
}

// heldSpec is a child that waits for a person.
const heldSpec = `name: held
steps:
  - { id: ok, approve: { message: "go?" } }
`

// A cancel of a root with 2,000 waiting children returns at once (the
// time is logged); a worker cancels all 2,001 within 30 s, and no child
// of the canceled tree is started after.
func TestCancelOfARootWithTwoThousandChildren(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 2,000 workflows")
	}
	t.Parallel()
	e := testenv.Start(t, testenv.Options{})
	if _, err := e.Client.PutSpec(t.Context(), "held", e.Spec(heldSpec)); err != nil {
		t.Fatal(err)
	}
	const n = 2000
	wspec := e.Spec("name: many\ninput: { items: [] }\nsteps:\n  - { id: kids, for_each: \"{{ .Input.items }}\", max_items: 2000, max_parallel: 2000, workflow: { spec: held } }\n")
	items := make([]any, n)
	for i := range items {
		items[i] = i
	}
	wspec.Input = map[string]any{"items": items}
	root := e.Submit(t, wspec)
	poll.Until(t, 240*time.Second, func() (bool, string) { // 2,000 spawns: 9s alone, over 2m beside a loaded make test
		w := countNamed(t, e, "held", store.StateWaiting)
		return w == n, fmt.Sprintf("%d of %d children waiting (%d in all)", w, n, countNamed(t, e, "held", ""))
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	start := time.Now()
	state, err := e.Client.Cancel(ctx, root)
	took := time.Since(start)
	if err != nil || state != store.StateCanceled {
		t.Fatalf("cancel: %s %v", state, err)
	}
	t.Logf("cancel of a root with %d waiting children returned in %s", n, took)
	// 3s alone; beside a loaded make test (a killed Redis's reconnects,
	// the race detector) past 30s once: the tree's cancel reaches every
	// child, how fast is bench's to say
	poll.Until(t, 240*time.Second, func() (bool, string) {
		c := countNamed(t, e, "held", store.StateCanceled)
		return c == n, fmt.Sprintf("%d of %d children canceled %s after the cancel", c, n, time.Since(start).Round(time.Millisecond))
	})
	t.Logf("all %d workflows canceled %s after the cancel", n+1, time.Since(start).Round(time.Millisecond))
	if wf, err := e.Store.Summary(t.Context(), root); err != nil || wf.State != store.StateCanceled {
		t.Fatalf("the root: %+v %v", wf, err)
	}
	if size, _ := e.Store.TreeSize(t.Context(), root); size != n+1 {
		t.Fatalf("the tree has %d workflows, want %d", size, n+1)
	}
}

// A worker that died after reserving children and before creating them
// (their reservations are in the tree, their records are not): the spawns
// delivered again find their reservations and count once. With a bound
// of 3, the two reserved children start and the third is dead-lettered
// as class limit, counted in agentq_dead_letters_total. On a Redis
// Cluster too, where the tree (in its root's slot) and each child's record
// live in different slots.
func TestSpawnsReservedByAWorkerThatDiedCountOnce(t *testing.T) {
	t.Parallel()
	for _, cluster := range []bool{false, true} {
		t.Run(map[bool]string{false: "redis", true: "cluster"}[cluster], func(t *testing.T) {
			spawnsReservedByAWorkerThatDied(t, cluster)
		})
	}
}

func spawnsReservedByAWorkerThatDied(t *testing.T, cluster bool) {
	e := testenv.Start(t, testenv.Options{NoWorker: true, Metrics: true, Cluster: cluster})
	e.Config.Limits.MaxTreeWorkflows = 3
	if _, err := e.Client.PutSpec(t.Context(), "held", e.Spec(heldSpec)); err != nil {
		t.Fatal(err)
	}
	root := e.Submit(t, e.Spec("name: three\ninput: { items: [1, 2, 3] }\nsteps:\n  - { id: kids, for_each: \"{{ .Input.items }}\", workflow: { spec: held } }\n"))
	for i := range 2 { // the dead worker's reservations: the first attempt of kids[0] and kids[1]
		if _, err := e.Store.ReserveChild(t.Context(), root, root, flow.ChildID(root, fmt.Sprintf("kids[%d]", i), 0, 1), 3); err != nil {
			t.Fatal(err)
		}
	}
	e.StartWorker(t)
	poll.Until(t, 30*time.Second, func() (bool, string) {
		dls, err := e.Client.DeadLetters(t.Context(), "limit")
		w := countNamed(t, e, "held", store.StateWaiting)
		return err == nil && len(dls) == 1 && w == 2, fmt.Sprintf("%d dead letters of class limit (%v), %d children waiting", len(dls), err, w)
	})
	dls, _ := e.Client.DeadLetters(t.Context(), "limit")
	if dls[0].Step != "kids[2]" || !strings.Contains(dls[0].Reason, "limits.max_tree_workflows (3)") {
		t.Fatalf("the dead letter: %+v", dls[0])
	}
	if n, _ := e.Store.TreeSize(t.Context(), root); n != 3 || countNamed(t, e, "held", "") != 2 {
		t.Fatalf("the tree has %d workflows, want 3", n)
	}
	if body := scrape(t, e.MetricsURL); !strings.Contains(body, `agentq_dead_letters_total{class="limit"} 1`) {
		t.Fatalf("no dead letter of class limit counted:\n%s", grepLines(body, "agentq_dead_letters_total"))
	}
	if _, err := e.Client.Cancel(t.Context(), root); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, func() (bool, string) {
		n := countNamed(t, e, "held", store.StateCanceled)
		return n == 2, fmt.Sprintf("%d of 2 children canceled", n)
	})
}

// A worker SIGKILLed right after a map instance created its child, before
// its task ended: the spawn delivered again finds its child, and its
// reservation: five children, a tree of six.
func TestAWorkerKilledMidSpawnCountsEachChildOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a worker process")
	}
	t.Parallel()
	reported := make(chan []any, 1)
	e := childEnv(t, testenv.Options{NoWorker: true}, reported)
	id := e.Submit(t, e.Spec(fmt.Sprintf(researchSpec, "")))
	p := startWorkerProcess(t, e, 1, workerEnv+"_CRASH_AFTER_CHILD=1", workerEnv+"_CHILD_STEPS=1")
	<-p.done // it killed itself once a child existed
	if n, _ := e.Store.TreeSize(t.Context(), id); n != 2 {
		t.Fatalf("the tree has %d workflows when the worker died, want 2", n)
	}
	e.StartWorker(t)
	e.Wait(t, id, 150*time.Second, store.StateCompleted)
	if n, _ := e.Store.TreeSize(t.Context(), id); n != 6 {
		t.Fatalf("the tree has %d workflows, want 6", n)
	}
}

// A cancel of the root of a spec that starts itself, while it spawns:
// every workflow of the tree ends canceled, and then nothing is written:
// no child reserved, no workflow record.
func TestACancelWhileATreeSpawnsEndsItForGood(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{NoWorker: true, Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{{Latency: chaosllm.Fixed(20 * time.Millisecond)}}}})
	e.Config.Limits.MaxTreeWorkflows = 500
	fork := e.Spec(forkSpec)
	if _, err := e.Client.PutSpec(t.Context(), "fork", fork); err != nil {
		t.Fatal(err)
	}
	root := e.Submit(t, fork)
	e.StartWorker(t)
	poll.Until(t, 30*time.Second, func() (bool, string) {
		n, _ := e.Store.TreeSize(t.Context(), root)
		return n >= 30, fmt.Sprintf("the tree has %d workflows", n)
	})
	if _, err := e.Client.Cancel(t.Context(), root); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, func() (bool, string) {
		all, canceled := countNamed(t, e, "fork", ""), countNamed(t, e, "fork", store.StateCanceled)
		n, _ := e.Store.TreeSize(t.Context(), root)
		// a spawn reserved as its parent was canceled creates no child: the
		// tree may count a few more than there are records
		return all == canceled && n >= all, fmt.Sprintf("%d of %d workflows canceled, a tree of %d", canceled, all, n)
	})
	size, _ := e.Store.TreeSize(t.Context(), root)
	keys := workflowKeys(t, e)
	t.Logf("the tree ended with %d workflows", size)
	holdsFor(t, 2*time.Second, func() (bool, string) {
		n, _ := e.Store.TreeSize(t.Context(), root)
		k := workflowKeys(t, e)
		return n == size && k == keys, fmt.Sprintf("after the cancel: a tree of %d (was %d), %d workflow records (were %d)", n, size, k, keys)
	})
}
