package producer_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/tasks"
)

// fiveHeld starts a root whose map starts five children that wait for a
// person, and returns it once they wait.
func fiveHeld(t *testing.T, e *testenv.Env) (root string, children []string) {
	t.Helper()
	if _, err := e.Client.PutSpec(t.Context(), "held", e.Spec("name: held\nsteps:\n  - { id: ok, approve: { message: \"go?\" } }\n")); err != nil {
		t.Fatal(err)
	}
	root = e.Submit(t, e.Spec("name: five\ninput: { items: [1, 2, 3, 4, 5] }\nsteps:\n  - { id: kids, for_each: \"{{ .Input.items }}\", workflow: { spec: held } }\n"))
	poll.Until(t, 30*time.Second, func() (bool, string) {
		page, err := e.Client.ListPage(t.Context(), producer.ListOptions{Name: "held", State: store.StateWaiting})
		return err == nil && len(page) == 5, fmt.Sprintf("%d children waiting (%v)", len(page), err)
	})
	tree, err := e.Store.TreeOf(t.Context(), root)
	if err != nil || len(tree.Parent) != 5 {
		t.Fatalf("the tree: %+v %v", tree, err)
	}
	for c := range tree.Parent {
		children = append(children, c)
	}
	return root, children
}

// treeCancels are the tree cancels in the default queue, pending or
// completed.
func treeCancels(t *testing.T, e *testenv.Env, completed bool) int {
	t.Helper()
	insp := asynq.NewInspectorFromRedisClient(e.Redis)
	list := insp.ListPendingTasks
	if completed {
		list = insp.ListCompletedTasks
	}
	ts, err := list("default", asynq.PageSize(1000))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ti := range ts {
		if ti.Type == tasks.TypeCancelTree {
			n++
		}
	}
	return n
}

// storedSpec is workflow id's spec, as stored with it.
func storedSpec(t *testing.T, e *testenv.Env, id string) *spec.Spec {
	t.Helper()
	raw, err := e.Store.Spec(t.Context(), id)
	var s spec.Spec
	if err == nil {
		err = json.Unmarshal(raw, &s)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &s
}

// A cancel marks the root and returns; the children are canceled by a
// queued task, which waits for a worker: with none running the children
// still wait, and the worker that starts cancels them.
func TestCancelLeavesTheTreeToQueuedWork(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	root, children := fiveHeld(t, e)
	e.StopWorker(t)
	state, err := e.Client.Cancel(t.Context(), root)
	if err != nil || state != store.StateCanceled {
		t.Fatalf("cancel: %s %v", state, err)
	}
	if n := treeCancels(t, e, false); n != 1 {
		t.Fatalf("%d tree cancels queued, want 1", n)
	}
	for _, c := range children {
		if w, _ := e.Store.Summary(t.Context(), c); w.State != store.StateWaiting {
			t.Fatalf("child %s is %s with no worker running", c, w.State)
		}
	}
	e.StartWorker(t)
	for _, c := range children {
		e.Wait(t, c, 20*time.Second, store.StateCanceled)
	}
	if n, _ := e.Store.TreeSize(t.Context(), root); n != 6 {
		t.Fatalf("the tree has %d workflows, want 6", n)
	}
}

// A cancel that died between enqueuing its tree cancel and marking the
// root (the task is there, the root still runs): the task cancels the
// root and its children; delivered twice, it changes nothing more.
func TestATreeCancelWhoseCancelDiedCancelsTheRootToo(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	root, children := fiveHeld(t, e)
	wspec := storedSpec(t, e, root)
	for range 2 {
		if err := flow.Enqueue(t.Context(), e.Store, e.Asynq, flow.CancelTreeTask(root, 0, wspec, time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	e.Wait(t, root, 20*time.Second, store.StateCanceled)
	for _, c := range children {
		e.Wait(t, c, 20*time.Second, store.StateCanceled)
	}
	poll.Until(t, 10*time.Second, func() (bool, string) {
		n := treeCancels(t, e, true)
		return n == 2, fmt.Sprintf("%d of 2 tree cancels completed", n)
	})
	if dls, err := e.Client.DeadLetters(t.Context(), ""); err != nil || len(dls) != 0 {
		t.Fatalf("dead letters: %+v %v", dls, err)
	}
}

// A cancel's tree cancel that comes after its workflow was rerun (no
// worker ran between them) cancels the children of the canceled run and
// leaves the new run, and the children it starts, alone.
func TestATreeCancelAfterARerunLeavesTheNewRun(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	root, old := fiveHeld(t, e)
	e.StopWorker(t)
	if _, err := e.Client.Cancel(t.Context(), root); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.Rerun(t.Context(), root, "kids"); err != nil {
		t.Fatal(err)
	}
	e.StartWorker(t)
	for _, c := range old {
		e.Wait(t, c, 20*time.Second, store.StateCanceled)
	}
	poll.Until(t, 20*time.Second, func() (bool, string) {
		page, err := e.Client.ListPage(t.Context(), producer.ListOptions{Name: "held", State: store.StateWaiting})
		done := treeCancels(t, e, true)
		return err == nil && len(page) == 5 && done == 1, fmt.Sprintf("%d children of the rerun waiting (%v), %d tree cancel done", len(page), err, done)
	})
	if w, _ := e.Store.Summary(t.Context(), root); w.State != store.StateWaiting || w.Generation != 1 {
		t.Fatalf("the rerun root after the tree cancel: %s, run %d", w.State, w.Generation)
	}
	if n, _ := e.Store.TreeSize(t.Context(), root); n != 11 {
		t.Fatalf("the tree has %d workflows, want 11 (the root, five children of each run)", n)
	}
}
