package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentq/agentq/internal/store"
)

// A requeue marks a dead step queued and unblocks a workflow only when no
// other dead step blocks it; an undo restores both; the step's next
// outcome counts its death once; another run's dead letter and a step
// that is not dead are left alone.
func TestRequeueAndUndoKeepTheCountersTrue(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	create(t, s, "wf")
	settle(ctx, s, "wf", "a", store.Outcome{Done: true}, chordDeps)
	settle(ctx, s, "wf", "b", store.Outcome{Done: false, Error: "x"}, chordDeps)
	if state, _, _ := settle(ctx, s, "wf", "c", store.Outcome{Done: false, Error: "y"}, chordDeps); state != store.StateBlocked {
		t.Fatalf("two dead steps: %q", state)
	}
	step := func(id string) string {
		wf, err := s.Get(ctx, "wf")
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range wf.Steps {
			if st.ID == id {
				return st.State
			}
		}
		return ""
	}
	if st, err := s.Requeue(ctx, "wf", "b", 1); err != nil || st != store.StateBlocked || step("b") != store.StepDead {
		t.Fatalf("a dead letter of another run: %q %v, b %s", st, err, step("b"))
	}
	if st, err := s.Requeue(ctx, "wf", "a", 0); err != nil || st != store.StateBlocked || step("a") != store.StepDone {
		t.Fatalf("a step that is done: %q %v, a %s", st, err, step("a"))
	}
	if st, err := s.Requeue(ctx, "wf", "b", 0); err != nil || st != store.StateBlocked || step("b") != store.StepQueued {
		t.Fatalf("b requeued while c is dead: %q %v, b %s; want blocked, b queued", st, err, step("b"))
	}
	if st, err := s.Requeue(ctx, "wf", "c", 0); err != nil || st != store.StateRunning {
		t.Fatalf("c requeued too: %q %v; want running", st, err)
	}
	if st, err := s.Unrequeue(ctx, "wf", "c", 0); err != nil || st != store.StateBlocked || step("c") != store.StepDead {
		t.Fatalf("c's task stayed archived: %q %v, c %s; want blocked, c dead", st, err, step("c"))
	}
	if st, _ := s.Requeue(ctx, "wf", "c", 0); st != store.StateRunning {
		t.Fatalf("c requeued again: %q", st)
	}
	// b dies again, c is done: one dead step, counted once
	settle(ctx, s, "wf", "b", store.Outcome{Done: false, Error: "x"}, chordDeps)
	if state, _, _ := settle(ctx, s, "wf", "c", store.Outcome{Done: true}, chordDeps); state != store.StateBlocked {
		t.Fatalf("b dead again: %q", state)
	}
	if wf, _ := s.Summary(ctx, "wf"); wf.Counts == nil || wf.Counts.Dead != 1 {
		t.Fatalf("counts %+v, want one dead step", wf.Counts)
	}
	if _, err := s.Requeue(ctx, "gone", "b", 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a workflow that is gone: %v", err)
	}
}
