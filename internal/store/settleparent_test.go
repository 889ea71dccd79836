package store_test

import (
	"context"
	"testing"

	"github.com/agentq/agentq/internal/store"
)

// The settle that ends a workflow reads its parent link for the caller
// (told without another round trip); one that leaves it open reads none.
func TestTheEndingSettleReadsTheParentLink(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	link := &store.ParentLink{Workflow: "wfp", Step: "spawn", Gen: 2, Attempt: 1, Queue: "default", Depth: 1, Root: "wfp"}
	for _, w := range []store.NewWorkflow{
		{ID: "child", Name: "c", Spec: []byte(`{}`), Steps: []string{"a", "b"}, Parent: link},
		{ID: "plain", Name: "p", Spec: []byte(`{}`), Steps: []string{"a"}},
	} {
		if _, err := s.Create(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	r, err := s.Settle(ctx, "child", "a", store.Outcome{Done: true}, []store.Dependent{{ID: "b", Inputs: 1}})
	if err != nil || r.State != store.StateRunning || r.ParentRead || r.Parent != nil {
		t.Fatalf("settle a (the child still open): %+v, %v", r, err)
	}
	for range 2 { // delivered again: the same answer
		r, err = s.Settle(ctx, "child", "b", store.Outcome{Done: true}, nil)
		if err != nil || r.State != store.StateCompleted || !r.ParentRead || r.Parent == nil {
			t.Fatalf("settle b (the child ends): %+v, %v", r, err)
		}
		if got, want := *r.Parent, *link; got != want {
			t.Fatalf("parent %+v, want %+v", got, want)
		}
		if l, err := s.ParentOf(ctx, "child"); err != nil || *l != *r.Parent {
			t.Fatalf("ParentOf %+v, %v; the settle read %+v", l, err, r.Parent)
		}
	}
	r, err = s.Settle(ctx, "plain", "a", store.Outcome{Done: true}, nil)
	if err != nil || r.State != store.StateCompleted || !r.ParentRead || r.Parent != nil {
		t.Fatalf("settle a (not a child): %+v, %v", r, err)
	}
}
