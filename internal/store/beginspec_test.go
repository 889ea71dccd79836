package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/store"
)

// BeginReadingSpec is Begin with the stored spec read in the same
// script: everything else as Begin reads it, for a step, a step with
// inputs, a done step's checkpoint and a map instance's item.
func TestBeginReadingSpecReadsTheSpecBesideTheAttempt(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	const spec = `{"name":"chord","input":{"n":7},"steps":[]}`
	if _, err := s.Create(ctx, store.NewWorkflow{ID: "wf", Name: "chord", Spec: []byte(spec), Steps: []string{"a", "b", "c", "d", "m"}}); err != nil {
		t.Fatal(err)
	}
	a, err := s.BeginReadingSpec(ctx, "wf", "a", "t-a", 0, time.Minute, nil)
	if err != nil || string(a.Spec) != spec || a.Step.Attempts != 1 || a.Step.State != store.StepRunning || a.WorkflowState != store.StateRunning || a.Gen != 0 {
		t.Fatalf("begin a: %+v %v", a, err)
	}
	if b, err := s.Begin(ctx, "wf", "b", "t-b", 0, time.Minute, nil); err != nil || b.Spec != nil {
		t.Fatalf("Begin read the spec: %+v %v", b, err)
	}
	settle(ctx, s, "wf", "a", store.Outcome{Done: true, Output: "out-a", InputHash: "h1", Target: "p/m"}, chordDeps)
	a, err = s.BeginReadingSpec(ctx, "wf", "a", "t-a", 0, time.Minute, nil)
	if err != nil || string(a.Spec) != spec || a.Step.State != store.StepDone || a.Step.Output != "out-a" || a.Step.InputHash != "h1" {
		t.Fatalf("begin a done: %+v %v", a, err)
	}
	settle(ctx, s, "wf", "b", store.Outcome{Done: true, Output: "out-b"}, chordDeps)
	d, err := s.BeginReadingSpec(ctx, "wf", "d", "t-d", 0, time.Minute, []string{"a", "b"})
	if err != nil || string(d.Spec) != spec || d.Deps["a"].Output != "out-a" || d.Deps["b"].Output != "out-b" {
		t.Fatalf("begin d: %+v %v", d, err)
	}
	if _, err := s.Expand(ctx, "wf", "m", []string{`"x"`, `"y"`}, 2); err != nil {
		t.Fatal(err)
	}
	i, err := s.BeginReadingSpec(ctx, "wf", "m[1]", "t-m1", 0, time.Minute, nil)
	if err != nil || string(i.Spec) != spec || i.Item != `"y"` || i.Step.Attempts != 1 {
		t.Fatalf("begin m[1]: %+v %v", i, err)
	}
	if _, err := s.BeginReadingSpec(ctx, "gone", "a", "t", 0, time.Minute, nil); err == nil {
		t.Fatal("begin of a workflow that does not exist")
	}
}
