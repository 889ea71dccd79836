package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
)

// A tree holds at most its bound, the root included: a child is reserved
// by its id once however often its spawn is delivered (a redelivery, a
// worker that died between the reservation and the child's record), a
// child past the bound is refused with the count and the bound, and none
// is reserved once the root has ended. Fifty spawns at once of ten
// children each never pass it either.
func TestReserveChildIsBoundedIdempotentAndRefusedInAnEndedTree(t *testing.T) {
	_, rdb := redistest.New(t)
	s := store.New(rdb, time.Hour, nil)
	ctx := context.Background()
	create(t, s, "root")
	for i := range 4 { // the root and four children: five of five
		for range 2 { // each delivered twice
			if n, err := s.ReserveChild(ctx, "root", "root", fmt.Sprintf("c%d", i), 5); err != nil || n != i+2 {
				t.Fatalf("child %d: %d %v", i, n, err)
			}
		}
	}
	n, err := s.ReserveChild(ctx, "root", "c0", "c4", 5)
	var full *store.TreeFullError
	if !errors.As(err, &full) || !errors.Is(err, store.ErrTreeFull) || n != 5 || full.Workflows != 5 || full.Max != 5 {
		t.Fatalf("a sixth workflow: %d %v", n, err)
	}
	if n, err := s.ReserveChild(ctx, "root", "root", "c3", 5); err != nil || n != 5 {
		t.Fatalf("a reserved child delivered again in a full tree: %d %v", n, err)
	}
	if n, _ := s.TreeSize(ctx, "root"); n != 5 {
		t.Fatalf("tree size %d, want 5", n)
	}
	tree, err := s.TreeOf(ctx, "root")
	if err != nil || len(tree.Parent) != 4 || tree.Parent["c0"] != "root" {
		t.Fatalf("tree %+v %v", tree, err)
	}

	create(t, s, "wide")
	var wg sync.WaitGroup
	for p := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range 10 {
				_, _ = s.ReserveChild(ctx, "wide", "wide", fmt.Sprintf("p%d-c%d", p, c), 20)
			}
		}()
	}
	wg.Wait()
	if n, _ := s.TreeSize(ctx, "wide"); n != 20 {
		t.Fatalf("500 spawns at once left a tree of %d, want 20", n)
	}

	if _, err := s.Cancel(ctx, "root", []string{"a", "b", "c", "d"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReserveChild(ctx, "root", "c1", "late", 100); !errors.Is(err, store.ErrTreeEnded) {
		t.Fatalf("a child of a canceled tree: %v", err)
	}
	if _, err := s.ReserveChild(ctx, "gone", "gone", "orphan", 100); !errors.Is(err, store.ErrTreeEnded) {
		t.Fatalf("a child of a root that is gone: %v", err)
	}
}

// Under lists a workflow's descendants, parents first; RootOf finds a
// tree's root from a child's record, or walks up from one written before
// roots were recorded.
func TestTreeUnderAndRootOf(t *testing.T) {
	tree := &store.Tree{Root: "r", Parent: map[string]string{"a": "r", "b": "r", "a1": "a", "a2": "a", "a11": "a1", "b1": "b"}}
	under := tree.Under("a")
	if len(under) != 3 || under[2] != "a11" {
		t.Fatalf("under a: %v", under)
	}
	if n := len(tree.Under("r")); n != 6 {
		t.Fatalf("under the root: %d", n)
	}
	if n := len(tree.Under("b1")); n != 0 {
		t.Fatalf("under a leaf: %d", n)
	}

	_, rdb := redistest.New(t)
	s := store.New(rdb, time.Hour, nil)
	ctx := context.Background()
	create(t, s, "r")
	for _, w := range []store.NewWorkflow{
		{ID: "old1", Parent: &store.ParentLink{Workflow: "r", Step: "s", Depth: 1}},
		{ID: "old2", Parent: &store.ParentLink{Workflow: "old1", Step: "s", Depth: 2}},
		{ID: "new1", Parent: &store.ParentLink{Workflow: "x", Step: "s", Depth: 2, Root: "r"}},
	} {
		w.Name, w.Spec, w.Steps = "child", []byte(`{}`), []string{"s"}
		if _, err := s.Create(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	for wf, want := range map[string]string{"r": "r", "old2": "r", "new1": "r"} {
		if root, err := s.RootOf(ctx, wf, 32); err != nil || root != want {
			t.Errorf("root of %s: %q %v", wf, root, err)
		}
	}
	if _, err := s.RootOf(ctx, "old2", 0); err == nil {
		t.Error("a walk past its depth found a root")
	}
}

// A child is linked to its step only in the step's run and attempt: a
// stalled worker's link of an earlier attempt (after a requeue started
// another child) or of an earlier run does not replace the step's child,
// and a link to a record that is gone does not bring it back.
func TestAChildIsLinkedOnlyInItsStepsRunAndAttempt(t *testing.T) {
	_, rdb := redistest.New(t)
	s := store.New(rdb, time.Hour, nil)
	ctx := context.Background()
	create(t, s, "p")
	a, err := s.Begin(ctx, "p", "a", "w", 0, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetChild(ctx, "p", "a", "wf_child1", 0, a.Step.Attempts); err != nil {
		t.Fatal(err)
	}
	for _, late := range []struct{ gen, attempt int }{{0, a.Step.Attempts - 1}, {0, a.Step.Attempts + 1}, {1, a.Step.Attempts}} {
		if err := s.SetChild(ctx, "p", "a", "wf_late", late.gen, late.attempt); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.Children(ctx, "p"); err != nil || len(got) != 1 || got[0] != "wf_child1" {
		t.Fatalf("children %v %v, want the step's own link only", got, err)
	}
	if err := s.SetChild(ctx, "gone", "a", "wf_child1", 0, 0); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.Exists(ctx, store.Prefix+"{wf:gone}:wf").Result(); n != 0 {
		t.Fatal("a link brought back a record that is gone")
	}
}
